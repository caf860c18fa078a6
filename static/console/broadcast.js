// The broadcast panel (issue 14 item 3): the operator writes a message in English and/or French,
// sends it (PUT …/broadcast) or clears it (DELETE …/broadcast); the live message, from the
// figures refresh, stands beside the inputs and never overwrites what is being typed.
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

export function show(f) {
  const b = f.broadcast;
  const parts = b ? ["en", "fr"].filter((l) => b[l]).map((l) => l + ": " + b[l]) : [];
  text($("bc-live"), parts.length ? parts.join(" · ") : T("console_broadcast_none"));
  $("bc-clear").disabled = !b;
}

async function send(method, body, done) {
  try {
    const answer = await api(method, "/broadcast", body);
    text($("applied"), T(done));
    $("applied").focus();
    return answer;
  } catch (e) {
    report(T(method === "PUT" ? "console_broadcast_send" : "console_broadcast_clear"), e.message);
    return null;
  }
}

export function init(afterChange) {
  $("bc-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = {};
    for (const l of ["en", "fr"]) if ($("bc-" + l).value.trim()) body[l] = $("bc-" + l).value;
    const answer = await send("PUT", body, "console_broadcast_sent");
    if (answer) await afterChange(answer);
  });
  $("bc-clear").addEventListener("click", async () => {
    const answer = await send("DELETE", null, "console_broadcast_cleared");
    if (answer) await afterChange(answer);
  });
}
