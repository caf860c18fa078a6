// The audit trail panel: the last 50 changes, refreshed after every change made here.
import { $, api, text } from "./api.js";

export async function refresh() {
  const rows = await api("GET", "/audit?limit=50");
  $("audit").replaceChildren(...rows.reverse().map((e) => {
    const tr = document.createElement("tr");
    for (const v of [new Date(e.at * 1000).toLocaleString(), e.operator, e.action,
      JSON.stringify(e.old), JSON.stringify(e.new)]) {
      tr.append(text(document.createElement("td"), v));
    }
    return tr;
  }));
}
