// The page for the curious (issue 15 item 1): reads GET /api/events/{event}/draw and recomputes
// it in the browser, as `waiting-room verify-draw` does (API.md "Verifiable draw"): SHA-256(seed)
// = commitment, the list's hash, every position from HMAC-SHA256(seed, public id); then finds
// the fan's own number from their visitor id (taken from this browser's join token when there
// is one; it is hashed here, never sent). WebCrypto needs a secure context (https or localhost).
(function () {
  "use strict";
  applyI18n();
  const params = new URLSearchParams(location.search);
  const event = (params.get("event") || "demo").replace(/[^a-z0-9-]/g, "");
  const $ = function (id) { return document.getElementById(id); };
  const enc = new TextEncoder();
  const hex = function (buf) {
    return Array.from(new Uint8Array(buf), function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  };
  const sha256 = async function (bytes) { return hex(await crypto.subtle.digest("SHA-256", bytes)); };
  const unhex = function (s) { return new Uint8Array(s.match(/../g).map(function (h) { return parseInt(h, 16); })); };
  let positions = null;

  function say(key, vars) { $("draw-status").textContent = T(key, vars); }

  // First 52 bits of HMAC-SHA256(seed, id), big-endian, as a BigInt.
  async function rank(key, id) {
    const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(id)));
    let r = 0n;
    for (let i = 0; i < 8; i++) r = (r << 8n) | BigInt(mac[i]);
    return r >> 12n;
  }

  async function verify(p) {
    if (!p.seed || !p.visitors) return say("draw_committed");
    if ((await sha256(unhex(p.seed))) !== p.commitment) return say("draw_bad_commitment");
    if ((await sha256(enc.encode(p.visitors.map(function (v) { return v + "\n"; }).join("")))) !== p.visitors_hash) {
      return say("draw_bad_hash");
    }
    const key = await crypto.subtle.importKey("raw", unhex(p.seed), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const ranked = await Promise.all(p.visitors.map(async function (id) { return { id: id, r: await rank(key, id) }; }));
    ranked.sort(function (a, b) { return a.r < b.r ? -1 : a.r > b.r ? 1 : (a.id < b.id ? -1 : a.id > b.id ? 1 : 0); });
    for (let i = 0; i < ranked.length; i++) {
      if (ranked[i].id !== p.visitors[i] || (i > 0 && ranked[i].id === ranked[i - 1].id)) {
        return say("draw_bad_position", { n: p.first_number + i });
      }
    }
    positions = new Map(p.visitors.map(function (id, i) { return [id, p.first_number + i]; }));
    say("draw_ok", { n: p.visitors.length });
    $("draw-mine").hidden = false;
  }

  // The visitor id of this browser's join token for the event (its `sub` claim), if any.
  function myVisitor() {
    try {
      const t = localStorage.getItem("join:" + event);
      const part = t && t.split(".")[1];
      return part ? JSON.parse(atob(part.replace(/-/g, "+").replace(/_/g, "/"))).sub || "" : "";
    } catch (e) { return ""; }
  }

  $("draw-mine").addEventListener("submit", async function (e) {
    e.preventDefault();
    const v = $("draw-visitor").value.trim();
    const n = positions && positions.get(await sha256(enc.encode(v)));
    $("draw-result").textContent = n ? T("draw_yours", { n: n }) : T("draw_not_in");
  });

  (async function () {
    try {
      const res = await fetch("/api/events/" + event + "/draw", { headers: { "Accept": "application/json" }, cache: "no-cache" });
      if (!res.ok) return say("draw_unavailable");
      const p = await res.json();
      $("draw-commitment").textContent = p.commitment;
      $("draw-seed").textContent = p.seed || T("draw_seed_hidden");
      $("draw-count").textContent = p.visitors ? String(p.visitors.length) : "–";
      $("draw-facts").hidden = false;
      $("draw-visitor").value = myVisitor();
      if (!window.crypto || !crypto.subtle) return say("draw_no_crypto");
      say("draw_checking");
      await verify(p);
    } catch (e) {
      say("draw_unavailable");
    }
  })();
})();
