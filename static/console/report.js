// The sale report panel (API.md "Sale report"): the totals, the charts (PNG) and the JSON and
// CSV downloads, fetched with the admin token (a plain link could not carry it). Refreshed when
// the console opens and on the operator's demand: building the charts costs the server CPU.
import { $, api, apiBlob, text, who } from "./api.js";
import { report as reportError } from "./errors.js";

let chartUrl = null;

function fig(label, value) {
  const d = document.createElement("div");
  d.className = "fig";
  d.append(text(document.createElement("small"), label), text(document.createElement("b"), value));
  return d;
}

const secs = (v) => (v == null ? "–" : v.toFixed(1) + " s");

function showTotals(r) {
  const t = r.totals;
  $("report-totals").replaceChildren(
    fig(T("report_joined"), t.joined),
    fig(T("report_admitted"), t.admitted),
    fig(T("report_abandoned"), t.abandoned),
    fig(T("report_no_shows"), t.no_shows),
    fig(T("report_wait"), secs(t.time_in_queue_p50_secs) + " / " + secs(t.time_in_queue_p90_secs)),
    fig(T("report_holds"), t.holds),
    fig(T("report_bookings"), t.bookings),
    fig(T("report_conversion"), t.conversion == null ? "–" : (100 * t.conversion).toFixed(1) + " %"),
    fig(T("report_errors"), t.server_errors + " / " + t.requests),
  );
  text($("report-span"), r.samples
    ? T("report_span", { n: r.samples, from: new Date(r.from_ms).toLocaleString(),
      to: new Date(r.to_ms).toLocaleString() })
    : T("report_empty"));
}

async function download(path, name) {
  const url = URL.createObjectURL(await apiBlob(path));
  const a = document.createElement("a");
  a.href = url;
  a.download = who().event + "-" + name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export async function refresh() {
  try {
    showTotals(await api("GET", "/report"));
    const png = await apiBlob("/report.png");
    if (chartUrl) URL.revokeObjectURL(chartUrl);
    chartUrl = URL.createObjectURL(png);
    $("report-chart").src = chartUrl;
    $("report-chart").hidden = false;
  } catch (e) { reportError(T("report_h2"), e.message); }
}

export function init() {
  $("report-refresh").addEventListener("click", refresh);
  $("report-json").addEventListener("click", () =>
    download("/report", "report.json").catch((e) => reportError(T("report_h2"), e.message)));
  $("report-csv").addEventListener("click", () =>
    download("/report.csv", "report.csv").catch((e) => reportError(T("report_h2"), e.message)));
}
