// The booking page: the admission token travels only in the HttpOnly cookie set by POST /session.
// The seat map is a section overview (the venue file's plan when it has a layout, and always a
// list of sections with price and seats free) and one section's seats as a grid as wide as the
// page (a phone never scrolls sideways), with a one-tap best-available hold per section; prices in
// the venue's currency (GET /api/shows/{show}/venue). A hold with an Idempotency-Key (a retry of the same click replays the same answer),
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
  const selected = new Map(); // seat id -> the seat as shown when chosen (any section)
  const seatsById = new Map(); // the shown section's seats
  let section = sessionStorage.getItem("section:" + show) || null; // the section shown
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

  // Focus goes to the element that states an action's result (issue 18 item 8): the error here.
  function showError(text) { $("error").hidden = false; $("error").textContent = text; $("error").focus(); }
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

  // `cache`: "no-store" but for the seat map and its overview, which the browser keeps and asks
  // for again with If-None-Match ("no-cache"): an unchanged map is a 304 without a body.
  async function call(method, path, body, extra, cache) {
    const headers = Object.assign({ "Accept": "application/json" }, extra || {});
    if (body) headers["Content-Type"] = "application/json";
    const res = await ServerClock.fetch(path, { method, headers, body: body ? JSON.stringify(body) : undefined, credentials: "same-origin", cache: cache || "no-store" });
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

  // Why the hold ended: the booking core's `ended_as` (expired, released, failed); an older
  // answer without it reads the payment's last gateway status.
  function endKind(h) {
    if (h.ended_as === "expired" || h.ended_as === "failed" || h.ended_as === "released") return h.ended_as;
    return h.payment && h.payment.gateway_status === "failed" ? "failed" : "released";
  }

  function released(h) {
    const kind = endKind(h);
    outcome(kind, kind + "_text", { key: "choose_again", run: () => chooseAgain(null) });
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

  // A section's booking fee per seat (venue file `fee_cents`): seat prices include it.
  function feeOf(sectionName) {
    const s = (venue.sections || []).find((x) => x.name === sectionName);
    return (s && s.fee_cents) || 0;
  }

  // "£97.00", or with fees "£90.00 + £7.00 fees = £97.00": the price and the fee apart.
  function withFees(total, fees, currency) {
    return fees > 0 ? T("fees_breakdown", { price: money(total - fees, currency), fee: money(fees, currency), total: money(total, currency) })
      : money(total, currency);
  }

  // The sticky summary beside the Hold button: what is selected and what it costs.
  function summarise() {
    const ids = Array.from(selected.keys()).sort();
    const total = ids.reduce((sum, id) => sum + (selected.get(id).price_cents || 0), 0);
    const fees = ids.reduce((sum, id) => sum + feeOf(selected.get(id).section), 0);
    $("selection").textContent = ids.length === 0 ? T("selection_none")
      : T("selection_some", { n: ids.length, seats: ids.join(", "), total: withFees(total, fees) });
    $("hold").disabled = ids.length === 0;
  }

  function seatLabel(s) {
    return T("seat_label", { section: s.section, row: s.row, number: s.number, price: money(s.price_cents || 0), status: T("seat_" + s.status) });
  }

  // The price of a section from the overview: one price, or "from … to …" as "min–max".
  function sectionPrice(sec) {
    const lo = sec.price_cents_min || 0, hi = sec.price_cents_max || lo;
    const fee = feeOf(sec.id);
    if (lo === hi && fee > 0) return T("price_with_fee", { total: money(lo), price: money(lo - fee), fee: money(fee) });
    return lo === hi ? money(lo) : money(lo) + "–" + money(hi);
  }

  // The overview: the venue's plan when its file has a layout (a picture; pointer users may tap a
  // section on it), and always the list of sections, the keyboard's and screen reader's way.
  function renderOverview(ov) {
    const list = $("sections");
    list.textContent = "";
    for (const sec of ov.sections) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.id = "section-" + sec.id;
      b.textContent = T("section_item", { section: sec.id, price: sectionPrice(sec), n: sec.available });
      b.setAttribute("aria-pressed", sec.id === section ? "true" : "false");
      b.onclick = () => chooseSection(sec.id);
      li.appendChild(b);
      list.appendChild(li);
    }
    renderPlan(ov);
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(name, attrs, parent) {
    const el = document.createElementNS(SVG, name);
    for (const k in attrs) el.setAttribute(k, attrs[k]);
    parent.appendChild(el);
    return el;
  }

  function centre(points) {
    const n = points.length;
    return [points.reduce((a, p) => a + p[0], 0) / n, points.reduce((a, p) => a + p[1], 0) / n];
  }

  function renderPlan(ov) {
    const box = $("plan-box");
    box.textContent = "";
    const layout = venue.layout;
    if (!layout || !layout.sections || layout.sections.length === 0) return;
    const shapes = layout.sections.map((s) => s.shape.points).concat(layout.stage ? [layout.stage.points] : []);
    const all = [].concat(...shapes);
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    const [x0, y0] = [Math.min(...xs) - 2, Math.min(...ys) - 2];
    const [w, h] = [Math.max(...xs) - x0 + 2, Math.max(...ys) - y0 + 2];
    const plan = svg("svg", { id: "plan", viewBox: [x0, y0, w, h].join(" "), role: "img", "aria-label": T("plan") }, box);
    const pts = (p) => p.map((q) => q.join(",")).join(" ");
    if (layout.stage) {
      svg("polygon", { class: "stage", points: pts(layout.stage.points) }, plan);
      const [cx, cy] = centre(layout.stage.points);
      svg("text", { class: "stage-label", x: cx, y: cy, "text-anchor": "middle", "dominant-baseline": "middle" }, plan).textContent = T("stage");
    }
    const free = new Map(ov.sections.map((s) => [s.id, s.available]));
    for (const s of layout.sections) {
      const chosen = s.section === section ? " chosen" : "";
      const full = free.get(s.section) === 0 ? " full" : "";
      const area = svg("polygon", { class: "area" + full + chosen, points: pts(s.shape.points), "data-section": s.section }, plan);
      area.addEventListener("click", () => chooseSection(s.section));
      const [cx, cy] = centre(s.shape.points);
      svg("text", { class: "area-label" + chosen, x: cx, y: cy, "text-anchor": "middle", "dominant-baseline": "middle" }, plan).textContent = s.section;
    }
  }

  // The section whose seats are shown: the fan's last choice, else the first with seats free.
  function pickSection(ov) {
    if (ov.sections.some((s) => s.id === section)) return section;
    const open = ov.sections.find((s) => s.available > 0) || ov.sections[0];
    return open ? open.id : null;
  }

  async function chooseSection(id) {
    section = id;
    sessionStorage.setItem("section:" + show, id);
    await loadMap();
    $("section-h2").focus();
  }

  // Best available in the shown section, one tap: quantities 1..MAX (2 preselected).
  function renderBest(sec) {
    const sel = $("best-n");
    const keep = Number(sel.value) || Math.min(2, MAX);
    sel.textContent = "";
    for (let n = 1; n <= MAX; n++) {
      const o = document.createElement("option");
      o.value = String(n);
      o.textContent = String(n);
      sel.appendChild(o);
    }
    sel.value = String(keep);
    const label = () => { $("best").textContent = T("best_hold", { n: sel.value }); };
    sel.onchange = label;
    label();
    $("best").disabled = !sec || sec.available === 0;
  }

  // One section's seats as a grid: a line per row, as many columns as its longest row.
  function renderMap(map) {
    const box = $("seatmap");
    box.textContent = "";
    box.setAttribute("aria-label", T("section_seats", { section: section }));
    seatsById.clear();
    for (const s of map.seats) seatsById.set(s.id, s);
    // A seat of this section taken since it was picked is no longer selected; the others stay.
    for (const id of Array.from(selected.keys())) {
      if (selected.get(id).section !== section) continue;
      if (!seatsById.has(id) || seatsById.get(id).status !== "free") selected.delete(id);
      else selected.set(id, seatsById.get(id));
    }
    const rows = new Map();
    for (const s of map.seats) {
      if (!rows.has(s.row)) rows.set(s.row, []);
      rows.get(s.row).push(s);
    }
    const widest = Math.max(1, ...Array.from(rows.values(), (r) => r.length));
    box.classList.toggle("wide", widest > 14); // smaller numbers so that they fit their seats
    for (const [n, seats] of rows) {
      const row = document.createElement("div");
      row.className = "row";
      row.style.gridTemplateColumns = "2.4rem repeat(" + widest + ", minmax(0, 1fr))";
      const label = document.createElement("span");
      label.className = "label";
      label.setAttribute("aria-hidden", "true");
      label.textContent = T("row_short", { row: n });
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
    summarise();
  }

  function toggle(id, b) {
    if (selected.has(id)) selected.delete(id);
    else if (selected.size < MAX) selected.set(id, seatsById.get(id));
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
    $("waitlist-text").focus();
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
    const ov = await call("GET", "/api/shows/" + show + "/sections", undefined, undefined, "no-cache");
    if (ov.res.status === 401) return;
    only("picker", "book_h1", "tab_book");
    $("pick-hint").textContent = T("pick_up_to", { n: MAX });
    if (!ov.res.ok) { $("message").textContent = problem(ov.json, T("map_failed")); return; }
    section = pickSection(ov.json);
    const sec = ov.json.sections.find((s) => s.id === section);
    renderOverview(ov.json);
    $("message").textContent = T("seats_available", { n: ov.json.available, total: ov.json.capacity });
    $("section-h2").textContent = sec ? T("section_chosen_h2", { section: sec.id, price: sectionPrice(sec) }) : "";
    renderBest(sec);
    if (!sec) { summarise(); await showWaitlist(ov.json.available === 0); return; }
    const { res, json } = await call("GET", "/api/shows/" + show + "/seats?section=" + encodeURIComponent(section), undefined, undefined, "no-cache");
    if (res.status === 401) return;
    if (!res.ok) { $("message").textContent = problem(json, T("map_failed")); return; }
    renderMap(json);
    await showWaitlist(ov.json.available === 0);
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
    // Seat ids begin with their section: the fees inside the total, shown apart.
    const fees = (h.seats || []).reduce((sum, id) => sum + feeOf(String(id).split("-")[0]), 0);
    $("held-fees").hidden = !(fees > 0);
    $("held-fees").textContent = fees > 0 ? withFees(h.amount_cents || 0, fees, h.currency) : "";
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

  // Best available: one tap holds the best N free seats side by side in the shown section.
  $("best").onclick = async () => {
    const n = Number($("best-n").value) || 1;
    $("best").disabled = true;
    sessionStorage.setItem("hold-key:" + show, holdKey);
    const body = { best_available: { section: section, quantity: n } };
    const { res, json } = await call("POST", "/api/shows/" + show + "/holds", body, { "Idempotency-Key": holdKey });
    sessionStorage.removeItem("hold-key:" + show);
    holdKey = crypto.randomUUID();
    if (res.status === 401) return;
    if (res.status === 201 || res.status === 200) { await held(json); return; }
    const none = res.status === 409 && json && json.type === "/problems/no-seats-together";
    await loadMap();
    $("race").hidden = false;
    $("race").textContent = none ? T("best_none", { n: n, section: section }) : problem(json, T("hold_failed"));
    $("race").focus();
  };

  async function held(json) {
    clearError();
    $("race").hidden = true;
    selected.clear();
    rememberHold(json.hold_id);
    await start();
    focusHeadline();
  }

  $("hold").onclick = async () => {
    $("hold").disabled = true;
    sessionStorage.setItem("hold-key:" + show, holdKey);
    const seats = Array.from(selected.keys()).sort();
    const { res, json } = await call("POST", "/api/shows/" + show + "/holds", { seats }, { "Idempotency-Key": holdKey });
    sessionStorage.removeItem("hold-key:" + show);
    holdKey = crypto.randomUUID();
    if (res.status === 401) return;
    if (res.status === 201 || res.status === 200) { await held(json); return; }
    if (res.status === 409 && json && json.availability && !Array.isArray(json.availability)) {
      // Lost a race for some seats: say which, keep the others, and show the fresh map in place.
      const taken = seats.filter((id) => json.availability[id] && json.availability[id] !== "free");
      for (const id of taken) selected.delete(id); // also those of another section than the shown one
      const scroll = window.scrollY;
      await loadMap();
      window.scrollTo(0, scroll);
      $("race").hidden = false;
      $("race").textContent = T(taken.length === 1 ? "lost_one" : "lost_some", { seats: taken.join(", ") });
      $("race").focus(); // it says which seats went; the Hold button for the others is next to it
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
