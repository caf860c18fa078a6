// The server's clock for the fan pages and the console (case W15): countdowns and hold timers
// count from the server's time, never the device's, so a phone ten minutes fast or slow shows the
// same time left. Every answer fetched through ServerClock.fetch bounds the offset
// (server − device): the server wrote its `Date` header (whole seconds, rounded down) at a device
// time between sending the request and reading the answer, so the offset lies in
// [Date − received, Date + 1 s − sent]. The bounds of successive answers are intersected, which
// narrows the offset to about one round trip; bounds that no longer overlap mean the device clock
// was changed, and the latest answer starts again. Only answers the origin (or the CDN, which
// writes its own `Date`) produced now are observed: never a cached copy's header.
(function () {
  "use strict";
  let lo = -Infinity, hi = Infinity;

  function bound(serverMs, widthMs, sentAt, receivedAt) {
    const l = serverMs - receivedAt, h = serverMs + widthMs - sentAt;
    if (l > hi || h < lo) { lo = l; hi = h; return; }
    lo = Math.max(lo, l);
    hi = Math.min(hi, h);
  }

  const clock = {
    // Records one answer `res` fetched between device times `sentAt` and `receivedAt` (ms).
    observe: function (res, sentAt, receivedAt) {
      const date = Date.parse((res && res.headers && res.headers.get("Date")) || "");
      if (!isNaN(date)) bound(date, 1000, sentAt, receivedAt);
    },
    // Server − device, in ms (0 before any answer).
    offsetMs: function () { return isFinite(lo) && isFinite(hi) ? (lo + hi) / 2 : 0; },
    // The server's time now, epoch seconds.
    nowSecs: function () { return (Date.now() + clock.offsetMs()) / 1000; },
    // fetch() that observes the answer's Date header.
    fetch: async function (url, opts) {
      const sentAt = Date.now();
      const res = await fetch(url, opts);
      clock.observe(res, sentAt, Date.now());
      return res;
    },
    // "M min S s" (localised when i18n.js is loaded).
    format: function (secs) {
      const t = window.T || function (k) { return k; };
      secs = Math.max(0, Math.round(secs));
      const m = Math.floor(secs / 60), s = secs % 60;
      return (m > 0 ? m + " " + t("min") + " " : "") + s + " " + t("s");
    }
  };
  window.ServerClock = clock;
})();
