// The booking page: the admission token travels only in the HttpOnly cookie set by POST /session.
// Seat map, a hold with an Idempotency-Key (a retry of the same click replays the same answer),
// a countdown to the hold deadline, and payment on the gateway's checkout page. The countdown
// counts from the server's clock (clock.js: the booking core's Date headers), not the device's
// (case W15).
(function () {
  "use strict";
  const params = new URLSearchParams(location.search);
  const show = (params.get("show") || "demo").replace(/[^a-z0-9-]/g, "");
  const $ = (id) => document.getElementById(id);
  const selected = new Set();
  const MAX = 4;
  let holdKey = sessionStorage.getItem("hold-key:" + show) || crypto.randomUUID();
  let timer = null;

  function problem(body, fallback) {
    return (body && (body.detail || body.title)) || fallback;
  }

  async function call(method, path, body, extra) {
    const headers = Object.assign({ "Accept": "application/json" }, extra || {});
    if (body) headers["Content-Type"] = "application/json";
    const res = await ServerClock.fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined, credentials: "same-origin", cache: "no-store" });
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    if (res.status === 401) {
      $("error").hidden = false;
      $("error").textContent = "Your admission is missing or has expired.";
      if (json && json.waiting_room) $("back-link").href = json.waiting_room + "/?event=" + show;
      $("back").hidden = false;
    }
    return { res, json };
  }

  function renderMap(map) {
    const box = $("seatmap");
    box.textContent = "";
    const rows = new Map();
    for (const s of map.seats) {
      const key = s.section + " " + s.row;
      if (!rows.has(key)) rows.set(key, []);
      rows.get(key).push(s);
    }
    for (const [key, seats] of rows) {
      const row = document.createElement("div");
      row.className = "row";
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = key;
      row.appendChild(label);
      for (const s of seats) {
        const b = document.createElement("button");
        b.className = "seat " + s.status + (selected.has(s.id) ? " selected" : "");
        b.id = "seat-" + s.id;
        b.textContent = s.number;
        b.disabled = s.status !== "free";
        b.setAttribute("aria-label", "Section " + s.section + " row " + s.row + " seat " + s.number + ", " + s.status);
        b.setAttribute("aria-pressed", selected.has(s.id) ? "true" : "false");
        b.onclick = () => toggle(s.id, b);
        row.appendChild(b);
      }
      box.appendChild(row);
    }
    $("message").textContent = map.available + " of " + map.capacity + " seats available.";
  }

  function toggle(id, b) {
    if (selected.has(id)) selected.delete(id);
    else if (selected.size < MAX) selected.add(id);
    b.classList.toggle("selected", selected.has(id));
    b.setAttribute("aria-pressed", selected.has(id) ? "true" : "false");
    $("hold").disabled = selected.size === 0;
  }

  async function loadMap() {
    const { res, json } = await call("GET", "/api/shows/" + show + "/seats");
    if (!res.ok) { $("message").textContent = problem(json, "Could not load the seat map."); return; }
    $("picker").hidden = false;
    renderMap(json);
    showMapAge(res.headers.get("Seat-Map-Age-Ms"));
  }

  // How old the map is (the server's snapshot, Seat-Map-Age-Ms): seats shown free may already
  // be taken by a faster fan; the hold decides. English or French (i18n.js).
  function showMapAge(ms) {
    const age = Number(ms);
    if (ms === null || !Number.isFinite(age)) { $("map-age").hidden = true; return; }
    const secs = (age / 1000).toLocaleString(window.LANG || "en", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
    $("map-age").textContent = T("map_age", { s: secs });
    $("map-age").hidden = false;
  }

  function showHold(h) {
    $("picker").hidden = true;
    $("held").hidden = false;
    $("held-seats").textContent = h.seats.join(", ");
    $("message").textContent = "Seats held.";
    if (timer) clearInterval(timer);
    const tickDown = () => {
      const left = Math.max(0, h.expires_at - ServerClock.nowSecs());
      $("countdown").textContent = Math.floor(left / 60) + " min " + Math.floor(left % 60) + " s";
    };
    tickDown();
    timer = setInterval(tickDown, 1000);
    $("pay").onclick = async () => {
      $("pay").disabled = true;
      const { res, json } = await call("POST", "/api/holds/" + h.hold_id + "/pay");
      if (!res.ok) { $("pay").disabled = false; $("error").hidden = false; $("error").textContent = problem(json, "Payment could not start."); return; }
      location.assign(json.checkout_url);
    };
  }

  $("hold").onclick = async () => {
    $("hold").disabled = true;
    sessionStorage.setItem("hold-key:" + show, holdKey);
    const seats = Array.from(selected).sort();
    const { res, json } = await call("POST", "/api/shows/" + show + "/holds", { seats }, { "Idempotency-Key": holdKey });
    sessionStorage.removeItem("hold-key:" + show);
    holdKey = crypto.randomUUID();
    if (res.status === 201 || res.status === 200) {
      sessionStorage.setItem("hold:" + show, json.hold_id);
      showHold(json);
      return;
    }
    $("error").hidden = false;
    $("error").textContent = res.status === 409 ? "Someone was faster for some of those seats. The map is updated: please pick again." : problem(json, "The seats could not be held.");
    selected.clear();
    await loadMap();
  };

  (async function start() {
    const existing = params.get("hold") || sessionStorage.getItem("hold:" + show);
    if (existing) {
      const { res, json } = await call("GET", "/api/holds/" + existing);
      if (res.ok && json.status === "HELD" && json.expires_at > ServerClock.nowSecs()) { showHold(json); return; }
      if (res.ok && json.status === "PAID") { location.assign("/confirmation.html?hold=" + existing); return; }
      sessionStorage.removeItem("hold:" + show);
    }
    await loadMap();
  })();
})();
