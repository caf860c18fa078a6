// The figures panel: the live figures grid and the charts of the last 5 minutes.
import { $, text } from "./api.js";

const HISTORY = 300; // samples, one per second
const series = { queue_length: [], admitted_per_sec: [], active: [], cursor: [] };

export function show(f) {
  text($("state"), f.internal_state || f.state);
  text($("updated"), new Date(f.updated_at * 1000).toLocaleTimeString());
  const shown = [
    ["Waiting (live)", f.queue_length], ["Cursor", f.cursor], ["Last number", f.last_number],
    ["Pre-queued", f.prequeued],
    [T("console_opens_in"), f.state === "prequeue" ? ServerClock.format(f.opens_at - ServerClock.nowSecs()) : "–"],
    [T("console_opens_at"), opening(f.opens_at, f.time_zone || "UTC")], ["Active / max", f.active + " / " + f.max_active],
    ["Admit rate /s", f.admit_rate], ["Admitted /s (60 s)", f.admitted_per_sec],
    ["Cursor speed /s", f.wait.places_per_sec + " (" + f.wait.low_places_per_sec + "–" +
      f.wait.high_places_per_sec + ", " + f.wait.basis + ")"],
    ["Silent in window", f.silent_in_window], ["Skipped places", f.skipped_total],
    ["Returning", f.returning], ["Sessions ended", f.sessions_ended_total],
    ["Admitted total", f.admitted_total], ["PoW bits", f.pow_difficulty],
    // The stock rule: the line waits while every place left is in a live hold (0: not waiting).
    [T("console_stock_wait"), f.waiting_for_stock || 0],
  ];
  $("figures").replaceChildren(...shown.map(([k, v]) => {
    const d = document.createElement("div");
    d.className = "fig";
    d.append(text(document.createElement("small"), k), text(document.createElement("b"), String(v)));
    return d;
  }));
  for (const k of Object.keys(series)) {
    series[k].push(Number(f[k]) || 0);
    if (series[k].length > HISTORY) series[k].shift();
  }
  draw("c-queue", series.queue_length); draw("c-rate", series.admitted_per_sec);
  draw("c-active", series.active); draw("c-cursor", series.cursor);
}

// The opening as the event's local wall-clock time with its offset and zone
// ("25/10/2026, 01:30 GMT+1 Europe/London"): the fall-back hour's two 01:30s read apart.
function opening(at, zone) {
  if (!at) return "–";
  const local = new Intl.DateTimeFormat(window.LANG || "en", {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    hourCycle: "h23", timeZone: zone, timeZoneName: "shortOffset",
  }).format(new Date(at * 1000));
  return local + " " + zone;
}

function draw(id, values) {
  const c = $(id), dpr = window.devicePixelRatio || 1;
  c.width = c.clientWidth * dpr; c.height = c.clientHeight * dpr;
  const g = c.getContext("2d"), max = Math.max(1, ...values);
  g.clearRect(0, 0, c.width, c.height);
  g.strokeStyle = "#0b57d0"; g.lineWidth = 2 * dpr; g.beginPath();
  values.forEach((v, i) => {
    const x = (i / (HISTORY - 1)) * c.width, y = c.height - (v / max) * (c.height - 14 * dpr) - 2;
    i ? g.lineTo(x, y) : g.moveTo(x, y);
  });
  g.stroke();
  g.fillStyle = "#444"; g.font = 11 * dpr + "px system-ui";
  g.fillText("max " + max, 4 * dpr, 12 * dpr);
}
