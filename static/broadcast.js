// The operator's broadcast message (issue 14 item 3), shown in the page's #broadcast notice in the
// fan's language (else the other one), always as text: `Broadcast.render` for the waiting page,
// which has the status document already. On the booking core's pages (#broadcast with
// `data-follow`) it asks the booking core where the waiting room is (GET /api/shows/{show}/venue
// → `waiting_room`), then follows that waiting room's public status document for the show's
// event (the CDN-cached copy every waiting fan reads; CORS-open, no credentials) at the interval
// it names.
(function () {
  "use strict";
  const show = (new URLSearchParams(location.search).get("show") || "demo").replace(/[^a-z0-9-]/g, "");
  const box = document.getElementById("broadcast");
  const textEl = document.getElementById("broadcast-text");
  window.Broadcast = { render: render };
  if (!box || !textEl) return;

  function render(b) {
    if (!box || !textEl) return;
    const shown = b && (b[window.LANG] ? window.LANG : b.en ? "en" : b.fr ? "fr" : null);
    box.hidden = !shown;
    if (!shown) return;
    textEl.textContent = b[shown];
    textEl.lang = shown;
  }

  async function follow(url) {
    let wait = 5000;
    try {
      const res = await fetch(url, { cache: "no-cache", credentials: "omit" });
      if (res.ok) {
        const doc = await res.json();
        render(doc.broadcast);
        wait = Math.max(2000, doc.poll_interval_ms || wait);
      }
    } catch (_) { /* the waiting room is out of reach: keep what is shown */ }
    setTimeout(() => follow(url), wait);
  }

  (async function start() {
    if (!box.hasAttribute("data-follow")) return;
    try {
      const res = await fetch("/api/shows/" + show + "/venue", { cache: "no-store" });
      const venue = res.ok ? await res.json() : {};
      if (!venue.waiting_room) return;
      follow(venue.waiting_room.replace(/\/+$/, "") + "/status/" + show + ".json");
    } catch (_) { /* no message without the venue */ }
  })();
})();
