// The live object of a row, read through the detail proxy as the caller (the leaf's RBAC
// decides), shown read-only as YAML or JSON; a refusal is shown as a plain explanation.

import { api, showError } from "./api.js";
import { toYaml } from "./yaml.js";

let shown = null; // the object on display
let opener = null; // the element focused before the dialog opened

function refusal(row, e) {
  const where = `${row.kind} ${row.namespace ? `${row.namespace}/` : ""}${row.name} on ${row.cluster}`;
  switch (e.status) {
    case 403:
      return `${row.cluster} refused to show you ${where}: ${e.message}`;
    case 404:
      return `${where} was not found (deleted since the last sync?): ${e.message}`;
    case 502:
    case 503:
      return `${row.cluster} could not answer: ${e.message}`;
    case 504:
      return `${row.cluster} did not answer in time: ${e.message}`;
    default:
      return e.message;
  }
}

function format() {
  return document.querySelector("#detail input[name=format]:checked").value;
}

function render() {
  const body = document.getElementById("detail-body");
  body.hidden = shown === null;
  document.querySelector("#detail .format").hidden = shown === null;
  body.textContent = shown === null ? "" : format() === "json" ? JSON.stringify(shown, null, 2) : toYaml(shown);
}

export async function openDetail(row) {
  const dialog = document.getElementById("detail");
  opener = document.activeElement;
  shown = null;
  document.getElementById("detail-title").textContent = `${row.kind} ${row.namespace ? `${row.namespace}/` : ""}${row.name} · ${row.cluster}`;
  showError("detail-error", "");
  document.getElementById("detail-body").textContent = "Loading…";
  document.getElementById("detail-body").hidden = false;
  document.querySelector("#detail .format").hidden = true;
  if (!dialog.open) dialog.showModal();
  // `_` stands for the namespace of cluster-scoped objects in the API's paths.
  const path = [row.cluster, row.namespace || "_", row.kind, row.name].map(encodeURIComponent).join("/");
  try {
    const answer = await api(`/objects/${path}`);
    shown = answer.object;
    render();
  } catch (e) {
    render();
    showError("detail-error", refusal(row, e));
  }
}

export function setUpDetail() {
  const dialog = document.getElementById("detail");
  document.getElementById("detail-close").addEventListener("click", () => dialog.close());
  for (const radio of dialog.querySelectorAll("input[name=format]")) {
    radio.addEventListener("change", render);
  }
  dialog.addEventListener("close", () => {
    if (opener && document.contains(opener)) opener.focus();
  });
}
