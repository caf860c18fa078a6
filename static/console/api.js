// The console's session (admin token, operator name, event; sessionStorage only) and its one
// way to call the admin API: a bearer token and X-Operator on every call, answers observed by
// the server clock (clock.js). A refused call throws an Error with the problem's detail.
export const session = {
  get: () => JSON.parse(sessionStorage.getItem("wr-console") || "null"),
  set: (s) => sessionStorage.setItem("wr-console", JSON.stringify(s)),
  clear: () => sessionStorage.removeItem("wr-console"),
};

let current = session.get();

export function use(s) { current = s; }
export function who() { return current; }

export async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + current.token, "X-Operator": current.operator };
  if (body) headers["Content-Type"] = "application/json";
  const r = await ServerClock.fetch("/admin/events/" + encodeURIComponent(current.event) + path,
    { method, headers, body: body ? JSON.stringify(body) : undefined, cache: "no-store" });
  const j = await r.json().catch(() => null);
  if (!r.ok) throw new Error((j && (j.detail || j.title)) || r.statusText);
  return j;
}

// The same call for a file (the report's CSV and PNG): the answer as a Blob.
export async function apiBlob(path) {
  const headers = { "Authorization": "Bearer " + current.token, "X-Operator": current.operator };
  const r = await ServerClock.fetch("/admin/events/" + encodeURIComponent(current.event) + path,
    { headers, cache: "no-store" });
  if (!r.ok) {
    const j = await r.json().catch(() => null);
    throw new Error((j && (j.detail || j.title)) || r.statusText);
  }
  return r.blob();
}

export const $ = (id) => document.getElementById(id);
export function text(el, value) { el.textContent = value; return el; }
