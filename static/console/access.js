// The access panel (issue 14 items 1–2): who may join the event (open, access code, invitation),
// generating codes (the CSV is downloaded at once: the server keeps only their hashes and cannot
// show them again), importing the promoter's codes and revoking codes from a CSV file. Every
// change goes through the admin API, which audits it; a refused change is reported in the errors
// panel. Strings in English and French (i18n.js).
import { $, api, text, who } from "./api.js";
import { report } from "./errors.js";

let changed = async () => {};

// A CSV body to the admin API (import, revoke); the JSON answer.
async function sendCsv(path, csv) {
  const s = who();
  const r = await ServerClock.fetch("/admin/events/" + encodeURIComponent(s.event) + path, {
    method: "POST", body: csv, cache: "no-store",
    headers: { "Authorization": "Bearer " + s.token, "X-Operator": s.operator, "Content-Type": "text/csv" },
  });
  const j = await r.json().catch(() => null);
  if (!r.ok) throw new Error((j && (j.detail || j.title)) || r.statusText);
  return j;
}

function download(csv, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}

export async function refresh() {
  const a = await api("GET", "/access");
  $("access-mode").value = a.access;
  text($("access-now"), T("console_access_now", { mode: T("console_access_" + a.access) }));
  text($("access-key"), a.invitation_key ? T("console_access_key", { fp: a.invitation_key }) : T("console_access_no_key"));
}

async function generate(ev) {
  ev.preventDefault();
  const body = { count: Number($("codes-count").value), uses: Number($("codes-uses").value || 1) };
  const until = $("codes-expiry").value;
  if (until) body.expires_ms = new Date(until).getTime();
  const tier = $("codes-tier").value.trim();
  if (tier) body.tier = tier;
  const s = who();
  try {
    const r = await ServerClock.fetch("/admin/events/" + encodeURIComponent(s.event) + "/codes", {
      method: "POST", body: JSON.stringify(body), cache: "no-store",
      headers: { "Authorization": "Bearer " + s.token, "X-Operator": s.operator, "Content-Type": "application/json" },
    });
    if (!r.ok) {
      const j = await r.json().catch(() => null);
      throw new Error((j && (j.detail || j.title)) || r.statusText);
    }
    const csv = await r.text();
    download(csv, s.event + "-codes.csv");
    text($("codes-result"), T("console_codes_made", { n: csv.trim().split("\n").length - 1 }));
    await changed();
  } catch (e) { report(T("console_codes_generate"), e.message); }
}

async function upload(input, path, shown) {
  const file = input.files && input.files[0];
  if (!file) return;
  try {
    const answer = await sendCsv(path, await file.text());
    text($("codes-result"), shown(answer));
    await changed();
  } catch (e) { report(file.name, e.message); }
  input.value = "";
}

export function init(afterChange) {
  changed = afterChange;
  $("access-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const mode = $("access-mode").value;
    try { await api("PUT", "/access", { mode }); await refresh(); await changed(); }
    catch (e) { report(T("console_access_apply"), e.message); }
  });
  $("codes-form").addEventListener("submit", generate);
  $("codes-import").addEventListener("change", (ev) => upload(ev.target, "/codes/import",
    (a) => T("console_codes_imported", { n: a.added, already: a.already })));
  $("codes-revoke").addEventListener("change", (ev) => upload(ev.target, "/codes/revoke",
    (a) => T("console_codes_revoked", { n: a.revoked, places: a.places_lost })));
}
