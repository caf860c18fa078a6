//! Per-route request metrics for every service's router: a latency histogram, counts by status
//! class, and requests in flight, under the service's prefix (`wr` for the waiting room, `bc`
//! for the booking core): `{prefix}_request_seconds{route, method}` (seconds, from the request
//! reaching the router to its response's head), `{prefix}_requests_total{route, class}` (`ok`,
//! `client_error`, `server_error`), `{prefix}_unavailable_total{route}` (503s) and
//! `{prefix}_http_in_flight` (what a drain waits for, case W13). The server's own view of a
//! route's latency: a load generator on the same machine adds its own wait for a CPU.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

/// The metric handles of one (prefix, method, route): registered once, then recorded without
/// a registry lookup or label allocation per request.
struct RouteMetrics {
    latency: metrics::Histogram,
    ok: metrics::Counter,
    client_error: metrics::Counter,
    server_error: metrics::Counter,
    unavailable: metrics::Counter,
}

impl RouteMetrics {
    fn new(prefix: &str, method: &Method, route: &str) -> Self {
        let r = route.to_owned();
        let total = format!("{prefix}_requests_total");
        let c = |class: &'static str| metrics::counter!(total.clone(), "route" => r.clone(), "class" => class);
        Self {
            latency: metrics::histogram!(format!("{prefix}_request_seconds"),
                "route" => r.clone(), "method" => method_label(method)),
            ok: c("ok"),
            client_error: c("client_error"),
            server_error: c("server_error"),
            unavailable: metrics::counter!(format!("{prefix}_unavailable_total"), "route" => r.clone()),
        }
    }
}

/// A method as a label: one of RFC 9110's methods (and `PATCH`), else `other`. Any client can
/// send a method of its own making, and each new label value is a new series kept until the
/// process ends (a newcomer review: 2,000 made-up methods grew `/metrics` from 72 kB to 2.5 MB).
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// Handles per (prefix, method label), then per matched route: looked up by the route as
/// borrowed, so an answered request allocates nothing here (bounded: routes are the routers',
/// plus `other`; methods are [`method_label`]'s).
type RouteTable = RwLock<HashMap<(&'static str, &'static str), HashMap<String, Arc<RouteMetrics>>>>;

static ROUTES: OnceLock<RouteTable> = OnceLock::new();

fn route_metrics(prefix: &'static str, method: &Method, route: &str) -> Arc<RouteMetrics> {
    let table = ROUTES.get_or_init(Default::default);
    let key = (prefix, method_label(method));
    if let Some(m) = table
        .read()
        .ok()
        .and_then(|t| t.get(&key).and_then(|r| r.get(route)).cloned())
    {
        return m;
    }
    let mut t = match table.write() {
        Ok(t) => t,
        Err(p) => p.into_inner(),
    };
    t.entry(key)
        .or_default()
        .entry(route.to_owned())
        .or_insert_with(|| Arc::new(RouteMetrics::new(prefix, method, route)))
        .clone()
}

/// Counts one request in `{prefix}_http_in_flight` until dropped, also when the client goes
/// away and the handler is cancelled.
struct InFlight(metrics::Gauge);

impl InFlight {
    fn enter(prefix: &str) -> Self {
        let g = metrics::gauge!(format!("{prefix}_http_in_flight"));
        g.increment(1.0);
        Self(g)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Middleware (`axum::middleware::from_fn_with_state(prefix, track)`): the metrics of the
/// module's doc for each request, by matched route.
pub async fn track(State(prefix): State<&'static str>, req: Request, next: Next) -> Response {
    let m = route_metrics(
        prefix,
        req.method(),
        req.extensions()
            .get::<MatchedPath>()
            .map_or("other", |p| p.as_str()),
    );
    let start = Instant::now();
    let in_flight = InFlight::enter(prefix);
    let resp = next.run(req).await;
    drop(in_flight);
    let status = resp.status();
    m.latency.record(start.elapsed().as_secs_f64());
    if status == StatusCode::SERVICE_UNAVAILABLE {
        m.unavailable.increment(1);
    }
    match status.as_u16() {
        s if s < 400 => m.ok.increment(1),
        s if s < 500 => m.client_error.increment(1),
        _ => m.server_error.increment(1),
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::method_label;
    use axum::http::Method;

    /// A made-up method is labelled `other`: the series stay bounded whatever clients send.
    #[test]
    fn a_method_of_the_clients_making_is_labelled_other() {
        assert_eq!(method_label(&Method::POST), "POST");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        let made_up = Method::from_bytes(b"QWERTY").expect("a token");
        assert_eq!(method_label(&made_up), "other");
    }
}
