// The quiet lane panel (issue 15 item 2): the event's address rules (add: range, action, note;
// delete) and the shadow line (who, which rule, when), where a false positive is released to
// the back of the fans' line. Both are folded (`<details>`) until the operator opens them, so
// the console's main controls stay first in the keyboard order. Every change goes through the admin API, which audits it; a
// refused change is reported in the errors panel. Strings in English and French (i18n.js).
import { $, api, text } from "./api.js";
import { report } from "./errors.js";

let changed = async () => {};

function cell(tr, value) { tr.append(text(document.createElement("td"), value)); }

function button(label, onclick) {
  const b = text(document.createElement("button"), label);
  b.type = "button";
  b.onclick = onclick;
  return b;
}

function actionName(a) { return T("console_rule_" + a); }

async function showRules() {
  const rules = await api("GET", "/rules");
  $("rules").replaceChildren(...rules.map((r) => {
    const tr = document.createElement("tr");
    cell(tr, r.cidr);
    cell(tr, actionName(r.action) + (r.pow_bits ? " (" + r.pow_bits + ")" : ""));
    cell(tr, r.note || "");
    cell(tr, r.created_by + " · " + new Date(r.created_at * 1000).toLocaleString());
    cell(tr, r.id);
    const td = document.createElement("td");
    td.append(button(T("console_rule_delete"), async () => {
      try { await api("DELETE", "/rules/" + encodeURIComponent(r.id)); await refresh(); await changed(); }
      catch (e) { report(T("console_rule_delete") + " " + r.cidr, e.message); }
    }));
    tr.append(td);
    return tr;
  }));
  text($("rules-empty"), rules.length ? "" : T("console_rules_none"));
}

async function showShadow() {
  const line = await api("GET", "/shadow?limit=200");
  $("shadow").replaceChildren(...line.entries.map((e) => {
    const tr = document.createElement("tr");
    cell(tr, e.visitor_id);
    cell(tr, e.rule === "pow-failures" ? T("console_shadow_pow") : e.rule);
    cell(tr, e.address);
    cell(tr, new Date(e.at_ms).toLocaleString());
    cell(tr, String(e.shown_number));
    const td = document.createElement("td");
    td.append(button(T("console_shadow_release"), async () => {
      try {
        await api("POST", "/shadow/" + encodeURIComponent(e.visitor_id) + "/release");
        await refresh(); await changed();
      } catch (err) { report(T("console_shadow_release") + " " + e.visitor_id, err.message); }
    }));
    tr.append(td);
    return tr;
  }));
  text($("shadow-empty"), line.entries.length ? "" : T("console_shadow_none"));
}

export async function refresh() {
  await Promise.all([showRules(), showShadow()]);
}

export function init(afterChange) {
  changed = afterChange;
  $("rule-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { cidr: $("rule-cidr").value.trim(), action: $("rule-action").value };
    const bits = $("rule-bits").value;
    if (body.action === "challenge" && bits !== "") body.pow_bits = Number(bits);
    const note = $("rule-note").value.trim();
    if (note) body.note = note;
    try {
      await api("POST", "/rules", body);
      $("rule-cidr").value = ""; $("rule-note").value = "";
      await refresh(); await changed();
    } catch (e) { report(T("console_rule_add") + " " + body.cidr, e.message); }
  });
}
