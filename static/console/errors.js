// The errors panel: an operator's refused change stays on screen, with what was tried, until
// the operator dismisses it (a live refresh never clears it). Focus goes to the new error (it is
// the result of the operator's action), and after a dismissal to the next error or the result
// line.
import { $, text } from "./api.js";

export function report(what, message) {
  const li = document.createElement("li");
  li.className = "error";
  const msg = text(document.createElement("span"), what + ": " + message);
  const dismiss = text(document.createElement("button"), T("console_dismiss"));
  dismiss.type = "button";
  dismiss.className = "dismiss";
  dismiss.onclick = () => {
    const next = li.nextElementSibling || li.previousElementSibling;
    li.remove();
    (next || $("applied")).focus();
  };
  li.tabIndex = -1;
  li.append(msg, dismiss);
  $("errors").append(li);
  li.focus();
}
