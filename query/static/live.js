// The list's live feed: GET /api/v1/watch read with fetch() (EventSource cannot send the
// identity headers or the bearer token the API takes), resumed from the last event id after a
// dropped connection, paused while the tab is hidden (Page Visibility API), listed again after
// 410 Expired. The state ("live", "reconnecting", "paused") is shown beside the table.

import { identityHeaders } from "./api.js";

let current = null;

function indicator() {
  let node = document.getElementById("live");
  if (!node) {
    node = document.createElement("p");
    node.id = "live";
    node.className = "live";
    node.setAttribute("role", "status");
    const wrap = document.querySelector(".table-wrap");
    wrap.parentNode.insertBefore(node, wrap);
  }
  return node;
}

function show(state, text) {
  const node = indicator();
  node.dataset.state = state;
  node.textContent = text;
}

// Follow the changes after `rv` under `filters` (URLSearchParams): `onRow(type, row)` for each
// ADDED, MODIFIED or DELETED; `relist()` when the position expired.
export function follow(filters, rv, onRow, relist) {
  stop();
  if (!rv) return;
  const me = { filters, last: rv, onRow, relist, abort: null, retry: null, stopped: false };
  current = me;
  run(me);
}

export function stop() {
  if (!current) return;
  current.stopped = true;
  if (current.abort) current.abort.abort();
  clearTimeout(current.retry);
  current = null;
}

async function run(me) {
  if (me.stopped) return;
  if (document.hidden) {
    show("paused", "Live updates paused while this tab is hidden");
    return;
  }
  const params = new URLSearchParams(me.filters);
  params.set("resourceVersion", me.last);
  me.abort = new AbortController();
  try {
    const resp = await fetch(`/api/v1/watch?${params}`, {
      headers: { ...identityHeaders(), Accept: "text/event-stream" },
      signal: me.abort.signal,
    });
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    show("live", "Live: rows update as they change");
    await read(me, resp.body.getReader());
  } catch (e) {
    if (me.stopped || (e && e.name === "AbortError")) return;
  }
  if (me.stopped || document.hidden) return;
  show("reconnecting", "Live updates interrupted: reconnecting…");
  me.retry = setTimeout(() => run(me), 2000);
}

async function read(me, reader) {
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      handle(me, block);
      if (me.stopped) return;
    }
  }
}

function handle(me, block) {
  let id = "";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("id: ")) id = line.slice(4);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const event = JSON.parse(data);
  if (event.type === "ERROR") {
    if (event.object && event.object.code === 410) {
      stop();
      me.relist();
    }
    return;
  }
  if (id) me.last = id;
  if (["ADDED", "MODIFIED", "DELETED"].includes(event.type)) me.onRow(event.type, event.object);
}

document.addEventListener("visibilitychange", () => {
  const me = current;
  if (!me) return;
  if (document.hidden) {
    if (me.abort) me.abort.abort();
    clearTimeout(me.retry);
    show("paused", "Live updates paused while this tab is hidden");
  } else {
    run(me);
  }
});
