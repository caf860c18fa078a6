// The scheduled-phases panel (issue 14 item 2): the live schedule (from the figures) stands above
// the inputs, which the refresh never changes; times are typed and shown in this browser's time
// zone and sent as epoch seconds (PUT …/phases), or the schedule is cleared (DELETE …/phases).
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

const FIELDS = [
  ["prequeue_opens_at", "ph-prequeue", "console_phases_prequeue"],
  ["sale_opens_at", "ph-sale", "console_phases_sale"],
  ["sale_ends_at", "ph-end", "console_phases_end"],
];

export function show(f) {
  const p = f.phases;
  const parts = p ? FIELDS.filter(([k]) => p[k]).map(([k, , label]) =>
    T(label) + " " + new Date(p[k] * 1000).toLocaleString(window.LANG)) : [];
  text($("ph-live"), parts.length ? parts.join(" · ") : T("console_phases_none"));
  $("ph-clear").disabled = !p;
}

async function send(method, body, done, afterChange) {
  try {
    const answer = await api(method, "/phases", body);
    text($("applied"), T(done));
    $("applied").focus();
    await afterChange(answer);
  } catch (e) {
    report(T(method === "PUT" ? "console_phases_set" : "console_phases_clear"), e.message);
  }
}

export function init(afterChange) {
  $("ph-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = {};
    for (const [k, id] of FIELDS) {
      const v = $(id).value;
      if (v) body[k] = Math.floor(new Date(v).getTime() / 1000);
    }
    send("PUT", body, "console_phases_set_done", afterChange);
  });
  $("ph-clear").addEventListener("click", () => send("DELETE", null, "console_phases_cleared", afterChange));
}
