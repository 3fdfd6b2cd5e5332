// The header's alert count on every page: how many firing fleet alerts the caller may see
// (GET /api/v1/alerts), linking to the alerts page. Re-counted when the demo user changes or a token is pasted.

import { api } from "./api.js";

async function count() {
  const badge = document.getElementById("alerts-count");
  const link = document.getElementById("alerts-nav");
  if (!badge || !link) return;
  try {
    const body = await api("/alerts");
    const n = body.items.length;
    badge.textContent = String(n);
    badge.hidden = n === 0;
    link.setAttribute("aria-label", n === 1 ? "Alerts: 1 firing" : `Alerts: ${n} firing`);
  } catch (e) {
    badge.hidden = true;
  }
}

document.getElementById("demo-user")?.addEventListener("change", () => setTimeout(count, 0));
window.addEventListener("fleetscope:identity", () => setTimeout(count, 0));
count();
