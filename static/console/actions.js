// The state panel: each button is enabled only when the event's state allows its transition
// (the waiting room's rules, API.md "States"); close and sold out ask for a confirmation first.
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

// Transition → the states it is allowed from (waiting-room/src/http/transitions.rs).
const ALLOWED = {
  "open": ["prequeue", "opening"],
  "pause": ["open"],
  "resume": ["paused"],
  "close": ["prequeue", "opening", "open", "paused"],
  "sold-out": ["prequeue", "opening", "open", "paused", "closed"],
};
const CONFIRM = { "close": "console_confirm_close", "sold-out": "console_confirm_sold_out" };
let state = null;

export function show(f) {
  state = f.internal_state || f.state;
  for (const b of document.querySelectorAll("[data-act]")) {
    b.disabled = !ALLOWED[b.dataset.act].includes(state);
  }
}

export function init(afterChange, event) {
  const run = async (what) => {
    try {
      await api("POST", "/" + what);
      await afterChange();
      // The result line says what the state is now, and takes the focus (issue 18 item 8).
      text($("applied"), T("console_state_now", { what: what, state: $("state").textContent }));
      $("applied").focus();
    } catch (e) { report(what, e.message); }
  };
  for (const b of document.querySelectorAll("[data-act]")) {
    b.addEventListener("click", () => {
      const what = b.dataset.act;
      if (!CONFIRM[what]) { run(what); return; }
      text($("confirm-text"), T(CONFIRM[what], { event: event() }));
      text($("confirm-yes"), T(CONFIRM[what] + "_yes"));
      $("confirm").hidden = false;
      $("confirm-no").focus();
      $("confirm-yes").onclick = () => { $("confirm").hidden = true; run(what); };
      $("confirm-no").onclick = () => { $("confirm").hidden = true; b.focus(); };
    });
  }
}
