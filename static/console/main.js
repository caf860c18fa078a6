// The console's wiring: sign in and out, the once-a-second refresh that feeds every panel, and
// the change hook (after a knob, a transition, a rule or an access change: refresh the figures, then the audit trail).
import { $, api, session, text, use, who } from "./api.js";
import * as figures from "./figures.js";
import * as knobs from "./knobs.js";
import * as actions from "./actions.js";
import * as audit from "./audit.js";
import * as rules from "./rules.js";
import * as access from "./access.js";
import * as report from "./report.js";
import * as broadcast from "./broadcast.js";
import * as mode from "./mode.js";
import * as phases from "./phases.js";

let timer = null;

function showAll(f) {
  figures.show(f);
  knobs.show(f);
  actions.show(f);
  broadcast.show(f);
  mode.show(f);
  phases.show(f);
}

// A failed refresh is shown beside "updated" until the next good one: it is live status. Errors
// of the operator's own changes go to the errors panel and stay (errors.js).
async function tick() {
  try {
    showAll(await api("GET", ""));
    text($("error"), "");
  } catch (e) { text($("error"), e.message); }
}

async function afterChange(answer) {
  if (answer) showAll(answer); else await tick();
  await audit.refresh();
}

function start() {
  $("login").hidden = true; $("main").hidden = false;
  text($("who"), "operator " + who().operator);
  text($("ev"), who().event);
  tick(); audit.refresh().catch(() => {}); report.refresh();
  rules.refresh().catch((e) => text($("error"), e.message));
  access.refresh().catch((e) => text($("error"), e.message));
  timer = setInterval(tick, 1000);
  // The shadow line grows during a sale: its panel is re-read every 5 seconds.
  setInterval(() => rules.refresh().catch(() => {}), 5000);
}

applyI18n();
knobs.init(afterChange);
report.init();
actions.init(afterChange, () => who().event);
rules.init(afterChange);
broadcast.init(afterChange);
mode.init(afterChange);
phases.init(afterChange);
access.init(afterChange);

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  use({ token: $("token").value, operator: $("operator").value.trim(), event: $("event").value });
  try {
    await api("GET", "");
    session.set(who());
    start();
  } catch (e) { text($("login-error"), e.message); use(null); }
});

$("logout").addEventListener("click", () => {
  session.clear(); clearInterval(timer); location.reload();
});

if (who()) start();
