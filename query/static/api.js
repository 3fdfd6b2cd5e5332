// Shared by the pages: configuration, the caller's identity, API calls, the degraded banner.
// Identity is the API's: in `oidc` mode a bearer token (added by an authenticating proxy, or
// pasted into this tab's sessionStorage); in `header` mode the proxy sets the headers; in demo
// mode the user switcher chooses the X-Remote-User/X-Remote-Group headers.

export const config = JSON.parse(document.getElementById("fs-config").textContent);

const TOKEN_KEY = "fleetscope.token";
const DEMO_KEY = "fleetscope.demoUser";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function demoUser() {
  const users = config.demoUsers;
  if (!users || users.length === 0) return null;
  const chosen = localStorage.getItem(DEMO_KEY);
  return users.find((u) => u.name === chosen) || users[0];
}

export function identityHeaders() {
  const headers = { Accept: "application/json" };
  const user = demoUser();
  if (user) {
    headers[config.userHeader] = user.name;
    if (user.groups.length) headers[config.groupHeader] = user.groups.join(",");
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (config.authMode === "oidc" && token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

export async function api(path, params) {
  const query = params && params.toString() ? `?${params}` : "";
  const sentToken = sessionStorage.getItem(TOKEN_KEY);
  let resp;
  try {
    resp = await fetch(`/api/v1${path}${query}`, { headers: identityHeaders() });
  } catch (e) {
    throw new ApiError(0, "network", `The query service did not answer (${e.message}).`);
  }
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    body = null;
  }
  if (!resp.ok) {
    const code = (body && body.error) || `http_${resp.status}`;
    const message = (body && body.message) || `HTTP ${resp.status}`;
    // A 401 to a request sent before a token was pasted says nothing about the new token: only
    // offer the sign-in again when the token this request carried is still the current one.
    if (resp.status === 401 && sentToken === sessionStorage.getItem(TOKEN_KEY)) {
      offerSignIn(message);
    }
    throw new ApiError(resp.status, code, message);
  }
  return body;
}

// Saves what `path` answers as CSV (`Accept: text/csv`: every page of the query) to a file,
// with the caller's identity as `api` sends it (a plain link could not send the headers).
export async function downloadCsv(path, params, filename) {
  const headers = { ...identityHeaders(), Accept: "text/csv" };
  let resp;
  try {
    resp = await fetch(`/api/v1${path}?${params}`, { headers });
  } catch (e) {
    throw new ApiError(0, "network", `The query service did not answer (${e.message}).`);
  }
  if (!resp.ok) {
    let body = null;
    try {
      body = await resp.json();
    } catch (e) {
      body = null;
    }
    throw new ApiError(resp.status, (body && body.error) || `http_${resp.status}`,
      (body && body.message) || `HTTP ${resp.status}`);
  }
  const url = URL.createObjectURL(await resp.blob());
  const link = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function offerSignIn(message) {
  if (config.authMode !== "oidc") return;
  const box = document.getElementById("signin");
  box.hidden = false;
  document.getElementById("signin-text").textContent =
    `Not signed in (${message}). Usually an authenticating proxy in front of fleetscope adds ` +
    "the token; otherwise paste an OIDC ID token below (kept in this browser tab only).";
}

function setUpSignIn(reload) {
  const form = document.getElementById("signin-form");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const token = document.getElementById("signin-token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    document.getElementById("signin-token").value = "";
    document.getElementById("signin").hidden = true;
    window.dispatchEvent(new Event("fleetscope:identity"));
    reload();
  });
}

function setUpDemoSwitcher(reload) {
  const select = document.getElementById("demo-user");
  if (!select) return;
  const current = demoUser();
  for (const u of config.demoUsers || []) {
    const groups = u.groups.length ? ` [${u.groups.join(", ")}]` : "";
    const opt = new Option(`${u.name}${groups}`, u.name);
    opt.title = u.description;
    opt.selected = current !== null && u.name === current.name;
    select.add(opt);
  }
  if (!select.options.length) select.add(new Option("no demo users found", ""));
  select.addEventListener("change", () => {
    localStorage.setItem(DEMO_KEY, select.value);
    reload();
  });
}

export function setUpIdentity(reload) {
  setUpSignIn(reload);
  setUpDemoSwitcher(reload);
}

// -- the banner ---------------------------------------------------------------------------

function names(list, fmt) {
  const shown = list.slice(0, 8).map(fmt).join(", ");
  return list.length > 8 ? `${shown} and ${list.length - 8} more` : shown;
}

export function freshnessLines(f) {
  const lines = [];
  if (f.state === "rebuilding") lines.push(f.message);
  else if (f.degraded) lines.push(`Degraded: ${f.message}.`);
  if (f.stale.length) {
    const fmt = (s) => `${s.cluster} (last good sync ${s.lastSuccess ? ago(s.lastSuccess) : "never"})`;
    lines.push(`Stale data from ${names(f.stale, fmt)}.`);
  }
  if (f.notCollected.length) {
    lines.push(`Not collected yet: ${names(f.notCollected, (s) => s.cluster)}.`);
  }
  if (f.hiddenStaleRbac.length) {
    lines.push(
      `Hidden until access data is fresh again: ${names(f.hiddenStaleRbac, (s) => s.cluster)}.`,
    );
  }
  return lines;
}

export function showBanner(freshness) {
  const banner = document.getElementById("banner");
  const lines = freshness ? freshnessLines(freshness) : [];
  banner.replaceChildren();
  banner.hidden = lines.length === 0;
  banner.classList.toggle("rebuilding", !!freshness && freshness.state === "rebuilding");
  for (const line of lines) {
    const p = document.createElement("p");
    p.textContent = line;
    banner.append(p);
  }
  if (lines.length && !location.pathname.startsWith("/status")) {
    const a = document.createElement("a");
    a.href = "/status";
    a.textContent = "See the fleet status";
    banner.append(a);
  }
}

// -- formatting ---------------------------------------------------------------------------

export function ago(iso) {
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (Number.isNaN(s)) return iso;
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function timeElement(iso) {
  if (!iso) {
    const span = document.createElement("span");
    span.textContent = "—";
    return span;
  }
  const t = document.createElement("time");
  t.dateTime = iso;
  t.title = iso;
  t.textContent = ago(iso);
  return t;
}

export function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

export function showError(id, message) {
  const node = document.getElementById(id);
  node.textContent = message || "";
  node.hidden = !message;
}
