// The queue-mode panel (issue 14 item 2): the live mode stands beside the select, which the
// refresh never changes; "Switch mode" sends PUT …/mode and says the mode the server now reports.
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

const name = (m) => T("console_mode_" + m);

export function show(f) {
  text($("live-mode"), f.mode ? name(f.mode) : "–");
}

export function init(afterChange) {
  $("mode-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const answer = await api("PUT", "/mode", { mode: $("mode-select").value });
      text($("applied"), T("console_mode_now", { mode: name(answer.mode) }));
      $("applied").focus();
      await afterChange(answer);
    } catch (e) { report(T("console_mode_switch"), e.message); }
  });
}
