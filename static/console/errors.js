// The errors panel: an operator's refused change stays on screen, with what was tried, until
// the operator dismisses it (a live refresh never clears it).
import { $, text } from "./api.js";

export function report(what, message) {
  const li = document.createElement("li");
  li.className = "error";
  const msg = text(document.createElement("span"), what + ": " + message);
  const dismiss = text(document.createElement("button"), T("console_dismiss"));
  dismiss.type = "button";
  dismiss.className = "dismiss";
  dismiss.onclick = () => li.remove();
  li.append(msg, dismiss);
  $("errors").append(li);
}
