// The knobs panel: the live values stand beside the inputs, never in them, so a refresh never
// overwrites what the operator is typing (or typed and left). Apply sends every knob whose typed
// value differs from the live one, in one PATCH, and says what the server's answer shows was
// applied (or that it differs from what was asked).
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

const KNOBS = [
  { input: "k-rate", live: "live-rate", field: "admit_rate", parse: parseFloat, name: "console_rate" },
  { input: "k-max", live: "live-max", field: "max_active", parse: (v) => parseInt(v, 10), name: "console_max" },
  { input: "k-pow", live: "live-pow", field: "pow_difficulty", parse: (v) => parseInt(v, 10), name: "console_pow" },
];
let live = null;

export function show(f) {
  live = f;
  for (const k of KNOBS) text($(k.live), String(f[k.field]));
}

export function init(afterChange) {
  $("knobs").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {};
    for (const k of KNOBS) {
      const raw = $(k.input).value.trim();
      if (raw === "") continue;
      const v = k.parse(raw);
      if (!live || v !== live[k.field]) body[k.field] = v;
    }
    if (Object.keys(body).length === 0) { text($("applied"), T("console_nothing")); $("applied").focus(); return; }
    $("apply").disabled = true;
    try {
      const answer = await api("PATCH", "", body);
      const parts = [], differ = [];
      for (const k of KNOBS) {
        if (!(k.field in body)) continue;
        parts.push(T(k.name) + " " + answer[k.field]);
        if (answer[k.field] !== body[k.field]) differ.push(T(k.name));
      }
      text($("applied"), T("console_applied", { what: parts.join(", ") }) +
        (differ.length ? " " + T("console_differs", { what: differ.join(", ") }) : ""));
      $("applied").focus(); // the result, from the server's answer (issue 18 item 8)
      await afterChange(answer);
    } catch (e) {
      text($("applied"), "");
      report(T("console_apply"), e.message);
    } finally {
      $("apply").disabled = false;
    }
  });
}
