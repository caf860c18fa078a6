// The booking page: the admission token travels only in the HttpOnly cookie set by POST /session.
// Seat map, a hold with an Idempotency-Key (a retry of the same click replays the same answer),
// the hold's one deadline (`pay_by`: the last moment to start paying, counted on the server's
// clock from clock.js, never the device's, case W15), and payment on the gateway's checkout page.
// Every state has a way forward: a cancelled or failed payment can be paid again (a new attempt
// that names the one it replaces) or released; the page rebuilds itself from the hold on a
// reload and on Back (pageshow from the back/forward cache); each end (time up, released, payment
// failed, admission over) says what happened and offers the next step. Strings: i18n.js.
(function () {
  "use strict";
  const params = new URLSearchParams(location.search);
  const show = (params.get("show") || "demo").replace(/[^a-z0-9-]/g, "");
  const $ = (id) => document.getElementById(id);
  const selected = new Set();
  const seatsById = new Map(); // the last map's seats, for prices and labels
  const MAX = 4;
  const DEAD = { cancelled: "payment_cancelled", failed: "payment_failed_again", expired: "payment_expired_note" };
  let holdKey = sessionStorage.getItem("hold-key:" + show) || crypto.randomUUID();
  // The venue file's descriptive fields (GET /api/shows/{show}/venue): currency, layout…
  let venue = { currency: "EUR", layout: null };
  let timer = null;

  // The server's problem details are in English: other languages get the page's own words.
  function problem(body, fallback) {
    if (window.LANG !== "en") return fallback;
    return (body && (body.detail || body.title)) || fallback;
  }

  function showError(text) { $("error").hidden = false; $("error").textContent = text; }
  function clearError() { $("error").hidden = true; $("error").textContent = ""; }
  function stopTimer() { if (timer) clearInterval(timer); timer = null; stopWaitlist(); }

  // The page's state: one of the sections, its headline and tab title; focus moves to the headline.
  function only(section, headKey, tabKey) {
    for (const id of ["picker", "held", "outcome"]) $(id).hidden = id !== section;
    $("headline").textContent = T(headKey);
    document.title = T(tabKey);
  }

  function focusHeadline() { $("headline").focus(); }

  function rememberHold(id) {
    if (id) sessionStorage.setItem("hold:" + show, id);
    else sessionStorage.removeItem("hold:" + show);
    const q = "?show=" + show + (id ? "&hold=" + encodeURIComponent(id) : "");
    history.replaceState(null, "", location.pathname + q);
  }

  async function call(method, path, body, extra) {
    const headers = Object.assign({ "Accept": "application/json" }, extra || {});
    if (body) headers["Content-Type"] = "application/json";
    const res = await ServerClock.fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined, credentials: "same-origin", cache: "no-store" });
    let json = null;
    try { json = await res.json(); } catch (_) { json = null; }
    if (res.status === 401) admissionOver(json);
    return { res, json };
  }

  // An end state with its next step: `action` is {key, run} (a button) or {key, href} (a link).
  function outcome(kind, textKey, action) {
    stopTimer();
    clearError();
    only("outcome", kind + "_h1", "tab_" + kind);
    $("outcome").dataset.kind = kind;
    $("message").textContent = "";
    $("outcome-text").textContent = T(textKey);
    const button = $("outcome-action"), link = $("outcome-link");
    button.hidden = !action.run;
    link.hidden = !action.href;
    if (action.run) { button.textContent = T(action.key); button.disabled = false; button.onclick = action.run; }
    if (action.href) { link.textContent = T(action.key); link.href = action.href; }
    focusHeadline();
  }

  function admissionOver(json) {
    const wr = (json && json.waiting_room) || "";
    outcome("admission_over", "admission_over_text", { key: "rejoin", href: wr + "/?event=" + show });
  }

  async function chooseAgain(holdId) {
    if (holdId) {
      const { res, json } = await call("DELETE", "/api/holds/" + holdId);
      if (res.status === 401) return;
      if (res.status === 409 && json && json.type === "/problems/hold-paid") { location.assign("/confirmation.html?hold=" + holdId); return; }
    }
    rememberHold(null);
    selected.clear();
    await loadMap();
  }

  function timeUp(h) {
    outcome("over", "over_text", { key: "choose_again", run: () => chooseAgain(h.hold_id) });
  }

  function released(h) {
    const failed = h.payment && h.payment.gateway_status === "failed";
    outcome(failed ? "failed" : "released", failed ? "failed_text" : "released_text",
      { key: "choose_again", run: () => chooseAgain(null) });
  }

  // An amount in the venue's currency (a hold's own `currency` wins), in the page's language.
  function money(cents, currency) {
    return new Intl.NumberFormat(window.LANG || "en", { style: "currency", currency: currency || venue.currency || "EUR" }).format(cents / 100);
  }

  // Reads the venue once; an old venue file or a failed read leaves EUR and no layout.
  async function loadVenue() {
    try {
      const res = await fetch("/api/shows/" + show + "/venue", { cache: "no-store" });
      if (res.ok) venue = Object.assign(venue, await res.json());
    } catch (_) { /* keep the defaults */ }
  }

  // The sticky summary beside the Hold button: what is selected and what it costs.
  function summarise() {
    const ids = Array.from(selected).sort();
    const total = ids.reduce((sum, id) => sum + ((seatsById.get(id) || {}).price_cents || 0), 0);
    $("selection").textContent = ids.length === 0 ? T("selection_none")
      : T("selection_some", { n: ids.length, seats: ids.join(", "), total: money(total) });
    $("hold").disabled = ids.length === 0;
  }

  function seatLabel(s) {
    return T("seat_label", { section: s.section, row: s.row, number: s.number, status: T("seat_" + s.status) }) +
      ", " + money(s.price_cents || 0);
  }

  function renderMap(map) {
    const box = $("seatmap");
    box.textContent = "";
    seatsById.clear();
    for (const s of map.seats) seatsById.set(s.id, s);
    // A seat taken since it was picked is no longer selected; the others stay.
    for (const id of Array.from(selected)) {
      if (!seatsById.has(id) || seatsById.get(id).status !== "free") selected.delete(id);
    }
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
        b.setAttribute("aria-label", seatLabel(s));
        b.title = seatLabel(s);
        b.setAttribute("aria-pressed", selected.has(s.id) ? "true" : "false");
        b.onclick = () => toggle(s.id, b);
        row.appendChild(b);
      }
      box.appendChild(row);
    }
    $("message").textContent = T("seats_available", { n: map.available, total: map.capacity });
    summarise();
  }

  function toggle(id, b) {
    if (selected.has(id)) selected.delete(id);
    else if (selected.size < MAX) selected.add(id);
    b.classList.toggle("selected", selected.has(id));
    b.setAttribute("aria-pressed", selected.has(id) ? "true" : "false");
    summarise();
  }

  // Sold out for now: the next step is the waitlist. A fan on it sees their place, and an offer
  // (a hold made for them when seats come back) opens the hold page; polled every 3 s.
  let waitlistTimer = null;
  function stopWaitlist() { if (waitlistTimer) clearTimeout(waitlistTimer); waitlistTimer = null; }

  async function showWaitlist(soldOut) {
    stopWaitlist();
    // Only a sold-out map, or a fan who joined from this tab, asks about the waitlist.
    if (!soldOut && !sessionStorage.getItem("waitlist:" + show)) { $("waitlist").hidden = true; return; }
    const { res, json } = await call("GET", "/api/shows/" + show + "/waitlist");
    if (res.status === 401) return;
    const entry = res.ok ? json : null;
    if (entry && entry.status === "offered" && entry.hold_id) {
      sessionStorage.removeItem("waitlist:" + show);
      rememberHold(entry.hold_id);
      await start();
      focusHeadline();
      return;
    }
    const waiting = entry && entry.status === "waiting";
    $("waitlist").hidden = !(waiting || soldOut);
    $("waitlist-join").hidden = !!waiting || !soldOut;
    if (waiting) $("waitlist-text").textContent = T("waitlist_waiting", { n: entry.position });
    else if (soldOut) $("waitlist-text").textContent = T("waitlist_offer");
    if (waiting) waitlistTimer = setTimeout(() => showWaitlist(soldOut), 3000);
  }

  $("waitlist-join").onclick = async () => {
    $("waitlist-join").disabled = true;
    const { res, json } = await call("POST", "/api/shows/" + show + "/waitlist");
    $("waitlist-join").disabled = false;
    if (res.status === 401) return;
    if (res.status === 409 && json && json.type === "/problems/seats-available") { await loadMap(); return; }
    if (!res.ok) { showError(problem(json, T("waitlist_failed"))); return; }
    sessionStorage.setItem("waitlist:" + show, "1");
    await showWaitlist(true);
  };

  async function loadMap() {
    stopTimer();
    // The map itself is public: ask the door first, so an ended admission is said at once.
    const me = await call("GET", "/api/me");
    if (me.res.status === 401) return;
    // The fan's turn, in plain words: how long the admission leaves to choose and hold seats.
    const left = me.json && me.json.expires_at ? me.json.expires_at - ServerClock.nowSecs() : 0;
    $("turn").hidden = !(left > 0);
    if (left > 0) $("turn").textContent = T("your_turn", { left: ServerClock.format(left), time: localTime(me.json.expires_at) });
    const { res, json } = await call("GET", "/api/shows/" + show + "/seats");
    if (res.status === 401) return;
    only("picker", "book_h1", "tab_book");
    $("pick-hint").textContent = T("pick_up_to", { n: MAX });
    if (!res.ok) { $("message").textContent = problem(json, T("map_failed")); return; }
    renderMap(json);
    await showWaitlist(json.available === 0);
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

  // Device-clock time of a server moment (epoch s), for "until 20:41:07".
  function localTime(serverSecs) {
    return new Date(serverSecs * 1000 - ServerClock.offsetMs()).toLocaleTimeString(window.LANG || "en");
  }

  function showHold(h) {
    const payBy = h.pay_by || h.payment_expires_at || h.expires_at;
    if (ServerClock.nowSecs() >= payBy) { timeUp(h); return; }
    only("held", "held_h1", "tab_held");
    $("held-seats").textContent = h.seats.join(", ");
    $("held-total").textContent = money(h.amount_cents || 0, h.currency);
    $("message").textContent = "";
    const dead = h.payment && DEAD[h.payment.gateway_status];
    $("payment-note").hidden = !dead;
    $("payment-note").textContent = dead ? T(dead) : "";
    const pay = $("pay");
    pay.textContent = T(dead ? "pay_again" : "pay_now");
    pay.disabled = false;
    $("release").disabled = false;
    $("deadline-at").textContent = T("deadline_at", { time: localTime(payBy) });
    // Warn a minute before (a third of the time left for a short window).
    const warnAt = Math.min(60, Math.max(3, Math.floor((payBy - ServerClock.nowSecs()) / 3)));
    stopTimer();
    const tick = () => {
      const left = payBy - ServerClock.nowSecs();
      if (left <= 0) { timeUp(h); return; }
      $("countdown").textContent = ServerClock.format(Math.ceil(left));
      const warn = $("deadline-warning");
      if (left <= warnAt && warn.hidden) {
        warn.textContent = T("deadline_warning", { left: ServerClock.format(warnAt) });
        warn.hidden = false;
      } else if (left > warnAt) {
        warn.hidden = true;
      }
    };
    tick();
    timer = setInterval(tick, 250);
    pay.onclick = async () => {
      pay.disabled = true;
      clearError();
      const body = dead ? { replaces: h.payment_id } : null;
      const { res, json } = await call("POST", "/api/holds/" + h.hold_id + "/pay", body);
      if (res.ok) { location.assign(json.checkout_url); return; }
      if (res.status === 401) return;
      const type = json && json.type;
      if (type === "/problems/hold-paid") { location.assign("/confirmation.html?hold=" + h.hold_id); return; }
      if (type === "/problems/payment-session-over") { timeUp(h); return; }
      if (type === "/problems/hold-not-held") { await start(); return; }
      pay.disabled = false;
      showError(problem(json, T("pay_failed")));
    };
    $("release").onclick = async () => {
      $("release").disabled = true;
      const { res, json } = await call("DELETE", "/api/holds/" + h.hold_id);
      if (res.status === 401) return;
      if (res.ok) { rememberHold(null); selected.clear(); await loadMap(); focusHeadline(); return; }
      if (json && json.type === "/problems/hold-paid") { location.assign("/confirmation.html?hold=" + h.hold_id); return; }
      $("release").disabled = false;
      showError(problem(json, T("release_failed")));
    };
  }

  $("hold").onclick = async () => {
    $("hold").disabled = true;
    sessionStorage.setItem("hold-key:" + show, holdKey);
    const seats = Array.from(selected).sort();
    const { res, json } = await call("POST", "/api/shows/" + show + "/holds", { seats }, { "Idempotency-Key": holdKey });
    sessionStorage.removeItem("hold-key:" + show);
    holdKey = crypto.randomUUID();
    if (res.status === 401) return;
    if (res.status === 201 || res.status === 200) {
      clearError();
      $("race").hidden = true;
      selected.clear();
      rememberHold(json.hold_id);
      await start();
      focusHeadline();
      return;
    }
    if (res.status === 409 && json && json.availability && !Array.isArray(json.availability)) {
      // Lost a race for some seats: say which, keep the others, and show the fresh map in place.
      const taken = seats.filter((id) => json.availability[id] && json.availability[id] !== "free");
      const scroll = window.scrollY;
      await loadMap();
      window.scrollTo(0, scroll);
      $("race").hidden = false;
      $("race").textContent = T(taken.length === 1 ? "lost_one" : "lost_some", { seats: taken.join(", ") });
      $("hold").focus();
      return;
    }
    showError(res.status === 409 ? T("lost_race") : problem(json, T("hold_failed")));
    selected.clear();
    await loadMap();
  };

  // Builds the page from the server's view of the fan's hold (first load, reload, Back).
  async function start() {
    applyI18n("tab_book");
    await loadVenue();
    const existing = new URLSearchParams(location.search).get("hold") || sessionStorage.getItem("hold:" + show);
    if (existing) {
      const { res, json } = await call("GET", "/api/holds/" + existing);
      if (res.status === 401) return;
      if (res.ok && json.status === "PAID") { location.replace("/confirmation.html?hold=" + existing); return; }
      if (res.ok && json.status === "HELD") { rememberHold(existing); showHold(json); return; }
      if (res.ok && json.status === "RELEASED") { rememberHold(existing); released(json); return; }
      rememberHold(null);
    }
    await loadMap();
  }

  // Back from the checkout may restore this page from the back/forward cache with a disabled
  // button and a stale countdown: read the hold again.
  window.addEventListener("pageshow", (e) => { if (e.persisted) start(); });
  start();
})();
