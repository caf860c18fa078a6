// The waiting page: joins once (the join token lives in localStorage, never in a URL), follows the
// public status document at the interval it names, shows the people ahead its position answer counts
// (number - cursor - 1 minus places ahead whose fans left the line; the formula alone only when the
// answer has no `ahead`), lets the fan leave the line (the place goes to the people behind), and on
// admission claims the admission token and hands it to the booking core with a form POST. The
// countdown to opening counts from the server's clock (clock.js), not the device's (case W15).
// Before it, the page says what the fan waits for: the event's name, venue and date, and the
// opening as a clock time in the event's own time zone. From the status document it also shows
// the operator's broadcast message (broadcast.js) and, in `maintenance` mode, the maintenance
// notice (no claim then); closed before a scheduled pre-queue, it says when the line opens and
// joins again once it does (issue 14). A presale event's code or invitation
// step is access.js.
(function () {
  "use strict";
  const params = new URLSearchParams(location.search);
  const event = (params.get("event") || "demo").replace(/[^a-z0-9-]/g, "");
  const storeKey = "join:" + event;
  const $ = (id) => document.getElementById(id);
  $("draw-link").href = "/draw.html?event=" + event;
  let pollMs = 2000;
  let failures = 0;
  let firstCursor = null;
  let claiming = false;
  let awaitingLine = false; // closed until a scheduled pre-queue opens: join again then
  let leftLine = false; // the fan gave the place up: no polling until they join again
  // One polling loop at a time: leaving or joining again starts a new generation, and a tick of
  // an older one (a timer or a request still in flight) stops instead of polling beside it.
  let loop = 0;

  function backoff() {
    failures += 1;
    const base = Math.min(30000, 500 * 2 ** Math.min(failures, 6));
    return base / 2 + Math.random() * base / 2; // exponential backoff with jitter
  }

  async function api(path, opts) {
    const token = localStorage.getItem(storeKey);
    const headers = { "Accept": "application/json" };
    if (token) headers["Authorization"] = "Bearer " + token;
    const res = await ServerClock.fetch(path, Object.assign({ method: "GET", headers, cache: "no-store" }, opts || {}));
    let body = null;
    try { body = await res.json(); } catch (_) { body = null; }
    return { res, body };
  }

  // Solves the join challenge in a Web Worker (only when the operator turned proof of work on).
  async function proofOfWork() {
    const { res, body } = await api("/api/events/" + event + "/pow");
    if (!res.ok) throw new Error("pow challenge failed: " + res.status);
    $("state").textContent = T("checking");
    const solution = await new Promise(function (resolve, reject) {
      const w = new Worker("/pow-worker.js");
      w.onmessage = function (e) { w.terminate(); resolve(e.data.solution); };
      w.onerror = function (e) { w.terminate(); reject(e); };
      w.postMessage({ challenge: body.challenge, difficulty: body.difficulty });
    });
    return { "X-Pow-Challenge": body.challenge, "X-Pow-Solution": solution };
  }

  const BLOCKED = new Error("address blocked");

  async function join(powHeaders) {
    const opts = { method: "POST" };
    opts.headers = Object.assign({ "Accept": "application/json" }, powHeaders || {}, Access.headers());
    const token = localStorage.getItem(storeKey);
    if (token) opts.headers["Authorization"] = "Bearer " + token;
    const { res, body } = await api("/api/events/" + event + "/join", opts);
    // A code or invitation is needed or was refused (access.js): ask, then try again; an
    // invitation problem, or a revoked code, stops here.
    if (Access.revoked(body)) { localStorage.removeItem(storeKey); throw BLOCKED; }
    const access = await Access.handle(res, body);
    if (access === true) return join(powHeaders);
    if (access === false) throw BLOCKED;
    if (res.status === 401) { localStorage.removeItem(storeKey); return join(); }
    if (res.status === 403 && body && body.type === "/problems/pow-required" && !powHeaders) {
      return join(await proofOfWork());
    }
    // The operator blocked this address range: say so once, and stop asking (no retry loop).
    if (res.status === 403 && body && body.type === "/problems/address-blocked") {
      $("blocked").hidden = false;
      $("state").textContent = T("blocked_state");
      throw BLOCKED;
    }
    if (!res.ok) throw new Error("join failed: " + res.status);
    localStorage.setItem(storeKey, body.join_token);
    return body;
  }

  async function position() {
    const { res, body } = await api("/api/events/" + event + "/position");
    if (res.status === 410 && Access.revoked(body)) { localStorage.removeItem(storeKey); throw BLOCKED; }
    if (res.status === 401) { localStorage.removeItem(storeKey); await join(); return position(); }
    if (!res.ok) throw new Error("position failed: " + res.status);
    return body;
  }

  async function claim() {
    const { res, body } = await api("/api/events/" + event + "/admission", { method: "POST" });
    if (res.status === 409) return null; // not yet: keep waiting
    // The fan is told, and why, before being given a new place at the end of the line; the new
    // place comes only when the fan asks for it.
    if (res.status === 410 && body && body.type === "/problems/admission-expired") {
      lapsed("lapsed_expired", body.expired_at);
      return LAPSED;
    }
    if (res.status === 410 && body && body.type === "/problems/place-lost") {
      lapsed("lapsed_lost");
      return LAPSED;
    }
    if (!res.ok) throw new Error("claim failed: " + res.status);
    return body;
  }

  const LAPSED = "lapsed";
  function lapsed(key, at) {
    const time = at ? new Date(at * 1000 - ServerClock.offsetMs()).toLocaleTimeString(window.LANG || "en") : "";
    $("lapsed-text").textContent = T(key, { time: time });
    $("lapsed").hidden = false;
    document.title = T("lapsed_title");
    $("lapsed-title").focus();
    $("rejoin").onclick = function () { rejoin($("rejoin"), $("lapsed")); };
  }

  // A new place at the end of the line, asked for by the fan (after a lapsed admission or after
  // leaving); focus goes to the line's state, which says where they are.
  async function rejoin(button, section) {
    button.disabled = true;
    localStorage.removeItem(storeKey);
    firstCursor = null;
    try {
      const j = await join();
      if (j.queue_number !== null && j.queue_number !== undefined) {
        // Shown at once, also when the lapsed page had no number left to show.
        $("queue-number").textContent = j.queue_number;
        $("queue-box").hidden = false;
      }
      section.hidden = true;
      leftLine = false;
      loop += 1;
      document.title = T("tab_wait");
      $("state").textContent = T("placed");
      $("state").focus();
    } finally {
      button.disabled = false;
    }
    tick();
  }

  // "Leave the line": asks once, then gives the place up (POST …/leave) so everyone behind has one
  // fewer ahead at once. Focus follows each step: the question, the result, or the error.
  function showLeaveError(key) {
    $("leave-error").textContent = T(key);
    $("leave-error").hidden = false;
    $("leave-error").focus();
  }
  $("leave").onclick = function () {
    $("leave-error").hidden = true;
    $("leave-confirm").hidden = false;
    $("leave-question").focus();
  };
  $("leave-no").onclick = function () {
    $("leave-confirm").hidden = true;
    $("leave").focus();
  };
  $("leave-yes").onclick = async function () {
    $("leave-yes").disabled = true;
    try {
      const { res } = await api("/api/events/" + event + "/leave", { method: "POST" });
      $("leave-confirm").hidden = true;
      if (res.status === 409) { showLeaveError("leave_too_late"); return; }
      if (!res.ok) { showLeaveError("leave_failed"); return; }
      leftLine = true;
      loop += 1;
      localStorage.removeItem(storeKey);
      for (const id of ["queue-box", "countdown-box", "leave-box"]) $(id).hidden = true;
      $("left").hidden = false;
      document.title = T("left_title");
      $("left-title").focus();
    } catch (_) {
      $("leave-confirm").hidden = true;
      showLeaveError("leave_failed");
    } finally {
      $("leave-yes").disabled = false;
    }
  };
  $("left-rejoin").onclick = function () { rejoin($("left-rejoin"), $("left")); };

  function handOff(adm) {
    $("admitted").hidden = false;
    const form = $("handoff");
    form.action = adm.booking_url.replace(/\/$/, "") + "/session";
    $("handoff-token").value = adm.admission_token;
    $("handoff-show").value = event;
    form.submit();
  }

  const fmt = ServerClock.format;

  // What the fan waits for (GET /api/events/{event}/about): the event's name, venue and date,
  // written in the event's own time zone, which also gives the opening's local clock time.
  let about = { time_zone: "UTC" };
  async function loadAbout() {
    try {
      const res = await fetch("/api/events/" + event + "/about", { cache: "no-cache" });
      if (!res.ok) return;
      about = Object.assign(about, await res.json());
    } catch (_) { return; }
    const zone = about.time_zone || "UTC";
    const when = about.starts_at ? new Intl.DateTimeFormat(window.LANG || "en", {
      weekday: "long", day: "numeric", month: "long", year: "numeric",
      hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone: zone,
    }).format(new Date(about.starts_at * 1000)) : "";
    $("about-name").textContent = about.name || "";
    $("about-name").hidden = !about.name;
    const details = when ? T(about.venue ? "about_venue_when" : "about_when", { venue: about.venue, when: when, zone: zone })
      : (about.venue || "");
    $("about-details").textContent = details;
    $("about-details").hidden = !details;
    $("about").hidden = !(about.name || details);
    if (shownOpensAt) showOpensAt(shownOpensAt); // now in the event's time zone
  }

  // "Opens at 10:00 Europe/London" (or "Opens on Saturday 12 December at …" another day), in the
  // event's time zone: the same moment for every fan wherever they are.
  let shownOpensAt = null;
  function showOpensAt(opensAt) {
    shownOpensAt = opensAt;
    if (!opensAt) { $("opens-at").textContent = ""; return; }
    const zone = about.time_zone || "UTC";
    const lang = window.LANG || "en";
    const at = new Date(opensAt * 1000);
    const time = new Intl.DateTimeFormat(lang, { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone: zone }).format(at);
    const day = (d) => new Intl.DateTimeFormat("en", { year: "numeric", month: "2-digit", day: "2-digit", timeZone: zone }).format(d);
    const today = day(at) === day(new Date(ServerClock.nowSecs() * 1000));
    const date = new Intl.DateTimeFormat(lang, { weekday: "long", day: "numeric", month: "long", timeZone: zone }).format(at);
    // The zone with its offset at that moment ("Europe/London, GMT+1"): in a fall-back hour the
    // same clock time happens twice, and the offset says which.
    const offset = new Intl.DateTimeFormat("en", { timeZone: zone, timeZoneName: "shortOffset" })
      .formatToParts(at).find((p) => p.type === "timeZoneName");
    const named = offset ? zone + ", " + offset.value : zone;
    $("opens-at").textContent = T(today ? "opens_at" : "opens_on", { time: time, date: date, zone: named });
  }

  // An honest estimate: people ahead over the measured admission rate, shown as a range.
  // The status document's `wait` object gives the measured places per second with a low and a
  // high bound (API.md); the range shown is ahead / high .. ahead / low.
  // `toGo` is how far the cursor must move to reach this fan (queue number − cursor). While every
  // booking place is taken (`active` at `max_active`) the cursor stands still whatever the
  // measured speed says: the page says so and gives only a lower bound.
  function showWait(status, toGo) {
    const w = status.wait || {};
    const high = w.high_places_per_sec || w.places_per_sec || status.admitted_per_sec || status.admit_rate || 0;
    const low = w.low_places_per_sec || high;
    const stalled = status.state === "open" && status.max_active > 0 && status.active >= status.max_active;
    $("stalled").hidden = !(stalled && toGo > 0);
    if (stalled && toGo > 0) $("stalled").textContent = T("wait_stalled", { max: status.max_active });
    if (!(high > 0) || !(low > 0) || toGo === 0 || status.state !== "open" || status.mode === "maintenance") { $("wait-line").hidden = true; return; }
    // Rounded outward to whole seconds (low end down, high end up), so the range shown always
    // contains the range computed (loadtest's wait_range.rs judges the same way).
    const lo = Math.floor(toGo / high), hi = Math.ceil(toGo / low);
    $("wait").textContent = stalled ? T("wait_at_least", { lo: fmt(lo) })
      : T("wait_range", { lo: fmt(lo), hi: fmt(hi) });
    $("wait-line").hidden = false;
  }

  // Fans near the front tell the origin they are still here (the status document names the
  // interval and the window); everyone else costs the origin nothing.
  let lastBeat = 0;
  function heartbeat(status, ahead) {
    const every = status.heartbeat_interval_ms;
    const windowSize = status.ready_window;
    if (!every || windowSize === undefined || ahead > windowSize) return;
    if (Date.now() - lastBeat < every) return;
    lastBeat = Date.now();
    api("/api/events/" + event + "/heartbeat", { method: "POST" }).catch(function () {});
  }

  async function tick(generation) {
    const mine = generation === undefined ? loop : generation;
    const stale = () => leftLine || mine !== loop;
    if (stale()) return;
    let status;
    try {
      const res = await fetch("/status/" + event + ".json", { cache: "no-cache" });
      if (!res.ok) throw new Error("status " + res.status);
      status = await res.json();
      failures = 0;
      $("trouble").hidden = true;
    } catch (e) {
      $("trouble").hidden = false;
      setTimeout(() => tick(mine), backoff());
      return;
    }
    pollMs = status.poll_interval_ms || pollMs;
    Broadcast.render(status.broadcast); // the operator's message (broadcast.js)
    // Maintenance (status `mode`): nobody is let in; the notice says the place is kept.
    $("maintenance").hidden = status.mode !== "maintenance";
    // Per-fan answers (join, position) set the server's clock; the status document may be a
    // cached copy, so its own times are not used.
    const now = ServerClock.nowSecs();
    $("state").textContent = status.state === "open" && status.waiting_for_stock > 0
      ? T("waiting_for_stock", {n: status.waiting_for_stock})
      : T(status.state);
    if (status.mode === "maintenance") $("state").textContent = T("maintenance_state");
    // Scheduled phases: before the pre-queue opens the event is closed; the page says when the
    // line opens, and joins again (same join token) as soon as it does.
    const lineOpensAt = status.phases && status.phases.prequeue_opens_at;
    if (status.state === "closed" && lineOpensAt && lineOpensAt > now) {
      $("state").textContent = T("line_opens_in", { when: fmt(lineOpensAt - now) });
      awaitingLine = true;
    } else if (awaitingLine && status.state !== "closed") {
      awaitingLine = false;
      join().catch(function () {});
    }
    $("countdown-box").hidden = status.state !== "prequeue";
    if (status.state === "prequeue") {
      $("countdown").textContent = fmt(status.opens_at - now);
      showOpensAt(status.opens_at);
    }
    try {
      const pos = await position();
      if (stale()) return;
      // A pre-queued fan (no number before the opening) may leave the pre-queue too.
      if (pos.queue_number === null || pos.queue_number === undefined) $("leave-box").hidden = status.state !== "prequeue";
      if (pos.queue_number !== null && pos.queue_number !== undefined) {
        $("queue-box").hidden = false;
        $("queue-number").textContent = pos.queue_number;
        const cursor = Math.max(status.cursor || 0, pos.cursor || 0);
        if (firstCursor === null) firstCursor = cursor;
        // The cursor is the last number let in: the people ahead are the numbers between it and
        // this fan's less the places whose fans left (DECISIONS "People ahead"), counted by the
        // server (`ahead`); a newer cursor from the status document can only lower it.
        const distance = Math.max(0, pos.queue_number - cursor);
        const formula = Math.max(0, distance - 1);
        const ahead = distance === 0 ? 0 : (typeof pos.ahead === "number" ? Math.min(pos.ahead, formula) : formula);
        // Places the cursor must let in before this fan: the people ahead, then the fan.
        const toGo = distance === 0 ? 0 : ahead + 1;
        $("ahead").textContent = ahead;
        const span = Math.max(1, pos.queue_number - firstCursor);
        $("progress").value = Math.min(100, Math.round(100 * (1 - toGo / span)));
        $("leave-box").hidden = distance === 0;
        showWait(status, toGo);
        heartbeat(status, distance);
        if ((distance === 0 || pos.admitted) && !claiming && status.state === "open" && status.mode !== "maintenance") {
          claiming = true;
          const adm = await claim();
          claiming = false;
          if (adm === LAPSED) return; // waits for the fan's choice
          if (adm) { handOff(adm); return; }
        }
      }
    } catch (e) {
      if (e === BLOCKED) return;
      $("trouble").hidden = false;
      setTimeout(() => tick(mine), backoff());
      return;
    }
    setTimeout(() => tick(mine), pollMs);
  }

  (async function start() {
    applyI18n("tab_wait");
    loadAbout();
    try {
      const j = await join();
      $("state").textContent = T("placed");
      if (j.queue_number !== null && j.queue_number !== undefined) $("queue-number").textContent = j.queue_number;
    } catch (e) {
      if (e === BLOCKED) return;
      $("trouble").hidden = false;
      setTimeout(start, backoff());
      return;
    }
    tick();
  })();
})();
