//! Rate limiting of joins, heartbeats and admission claims (tower_governor, one limiter each).
//!
//! Calls that carry a valid join token (heartbeats, claims) are limited per visitor, not per
//! address (case W12: sixty fans behind one carrier NAT or stadium Wi-Fi each heartbeating at the
//! published interval must never be refused). Anonymous calls (joins) and calls whose token does
//! not verify fall back to the per-IP key, so a flood of bad tokens is still limited per address
//! and costs no store command (case W03). Checking the token here is an HMAC, no store call.
//!
//! The IP key believes `X-Forwarded-For` only from configured proxies (case W03): the key is
//! the peer IP, unless the peer is a trusted proxy, in which case it is the rightmost hop that is
//! not a trusted proxy. IPv6 clients are keyed by their /64 (one
//! subscriber usually holds a whole /64). Limiter memory stays bounded: the admitter loop calls
//! [`Limits::retain_recent`] every few seconds, which drops every key whose bucket is full again
//! (an idle client costs nothing after `burst / rate` seconds).

use axum::extract::connect_info::MockConnectInfo;
use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use governor::clock::QuantaInstant;
use governor::middleware::NoOpMiddleware;
use sale_common::Problem;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower_governor::governor::{GovernorConfig, GovernorConfigBuilder};
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::{GovernorError, GovernorLayer};

/// One limiter's configuration.
pub type Limiter = Arc<GovernorConfig<FanKey, NoOpMiddleware<QuantaInstant>>>;

/// Names the visitor of a request's valid join token, given its headers and the event id of the
/// path; `None` when there is no token or it does not verify. Must not call the store.
pub type VisitorOf = Arc<dyn Fn(&HeaderMap, &str) -> Option<String> + Send + Sync>;

/// A limiter key: one visitor of one event (a call with a valid join token), or one client
/// address (IPv6 by /64).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RateKey {
    /// `{event}/{visitor}` of a verified join token.
    Visitor(Arc<str>),
    /// The client address ([`client_ip`], [`rate_key`]).
    Ip(IpAddr),
}

/// Key extractor: the visitor of a valid join token when `visitor` is set, else the client IP.
#[derive(Clone)]
pub struct FanKey {
    ip: TrustedProxyKey,
    visitor: Option<VisitorOf>,
}

impl std::fmt::Debug for FanKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanKey")
            .field("per_visitor", &self.visitor.is_some())
            .finish()
    }
}

/// The event id of `/api/events/{event}/...`.
fn path_event(path: &str) -> Option<&str> {
    path.strip_prefix("/api/events/")?.split('/').next()
}

impl KeyExtractor for FanKey {
    type Key = RateKey;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        if let Some(visitor_of) = &self.visitor {
            let event = path_event(req.uri().path()).unwrap_or_default();
            if let Some(v) = visitor_of(req.headers(), event) {
                return Ok(RateKey::Visitor(format!("{event}/{v}").into()));
            }
        }
        self.ip.extract(req).map(RateKey::Ip)
    }
}

/// The limiters of the fan endpoints.
#[derive(Clone)]
pub struct Limits {
    /// `POST /api/events/{event}/join`.
    pub join: Limiter,
    /// `POST /api/events/{event}/heartbeat`.
    pub heartbeat: Limiter,
    /// `POST /api/events/{event}/admission`.
    pub claim: Limiter,
}

fn limiter(per_sec: u64, burst: u32, key: &FanKey) -> anyhow::Result<Limiter> {
    let period = Duration::from_nanos(1_000_000_000 / per_sec.max(1));
    GovernorConfigBuilder::default()
        .period(period)
        .burst_size(burst)
        .key_extractor(key.clone())
        .finish()
        .map(Arc::new)
        .ok_or_else(|| anyhow::anyhow!("rate limit: rate and burst must be > 0"))
}

impl Limits {
    /// Limiters for joins (`join_*`, per client IP) and for heartbeats and claims (`fan_*`, one
    /// limiter each, per visitor when `visitor_of` names one, else per client IP); rates per
    /// **second** per key.
    pub fn new(
        trusted: Vec<IpAddr>,
        join: (u64, u32),
        fan: (u64, u32),
        visitor_of: VisitorOf,
    ) -> anyhow::Result<Self> {
        let ip = TrustedProxyKey::new(trusted);
        let anonymous = FanKey {
            ip: ip.clone(),
            visitor: None,
        };
        let per_visitor = FanKey {
            ip,
            visitor: Some(visitor_of),
        };
        Ok(Self {
            join: limiter(join.0, join.1, &anonymous)?,
            heartbeat: limiter(fan.0, fan.1, &per_visitor)?,
            claim: limiter(fan.0, fan.1, &per_visitor)?,
        })
    }

    /// Forgets keys whose buckets are full again; returns the keys still tracked.
    pub fn retain_recent(&self) -> usize {
        [&self.join, &self.heartbeat, &self.claim]
            .iter()
            .map(|l| {
                l.limiter().retain_recent();
                l.limiter().len()
            })
            .sum()
    }

    /// The layer for one limiter: 429 problem+json with `Retry-After`.
    pub fn layer(
        l: &Limiter,
        what: &'static str,
    ) -> GovernorLayer<FanKey, NoOpMiddleware<QuantaInstant>, axum::body::Body> {
        GovernorLayer::new(l.clone()).error_handler(move |e| too_many(e, what))
    }
}

fn too_many(e: GovernorError, what: &'static str) -> Response {
    match e {
        GovernorError::TooManyRequests { wait_time, .. } => {
            metrics::counter!("wr_rate_limited_total", "route" => what).increment(1);
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                format!("Too many {what} requests"),
            )
            .retry_after(wait_time.max(1))
            .into_response()
        }
        _ => Problem::bad_request("cannot identify the client").into_response(),
    }
}

/// The peer address from `ConnectInfo` (or `MockConnectInfo` in router tests).
pub fn peer_ip(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .or_else(|| ext.get::<MockConnectInfo<SocketAddr>>().map(|c| c.0.ip()))
}

/// The limiter key of a client address: IPv4 as is, IPv6 cut to its /64 (IPv4-mapped IPv6
/// addresses count as IPv4).
pub fn rate_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
    }
}

/// Key extractor: peer IP, or the rightmost untrusted `X-Forwarded-For` hop behind a trusted
/// proxy.
#[derive(Debug, Clone)]
pub struct TrustedProxyKey {
    trusted: Arc<Vec<IpAddr>>,
}

impl TrustedProxyKey {
    /// Trusts `X-Forwarded-For` only from these peers.
    pub fn new(trusted: Vec<IpAddr>) -> Self {
        Self {
            trusted: Arc::new(trusted),
        }
    }

    /// Whether `peer` is a configured trusted proxy.
    pub fn is_trusted(&self, peer: IpAddr) -> bool {
        self.trusted.contains(&peer)
    }
}

impl KeyExtractor for TrustedProxyKey {
    type Key = IpAddr;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        let peer = peer_ip(req.extensions()).ok_or(GovernorError::UnableToExtractKey)?;
        Ok(rate_key(client_ip(peer, req.headers(), &self.trusted)))
    }
}

/// The client IP as far as it can be trusted: walks `X-Forwarded-For` from the right while the
/// current hop is a trusted proxy. An unparsable hop stops the walk at the last trusted address.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut current = peer;
    for hop in hops.iter().rev() {
        if !trusted.contains(&current) {
            break;
        }
        match hop.parse::<IpAddr>() {
            Ok(ip) => current = ip,
            Err(_) => break,
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xff(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", v.parse().expect("header"));
        h
    }

    #[test]
    fn untrusted_peer_ignores_the_header() {
        let peer: IpAddr = "203.0.113.7".parse().expect("ip");
        assert_eq!(client_ip(peer, &xff("1.2.3.4"), &[]), peer);
    }

    #[test]
    fn trusted_proxy_gives_the_rightmost_untrusted_hop() {
        let proxy: IpAddr = "10.0.0.1".parse().expect("ip");
        let got = client_ip(proxy, &xff("6.6.6.6, 198.51.100.9"), &[proxy]);
        assert_eq!(got, "198.51.100.9".parse::<IpAddr>().expect("ip"));
    }

    #[test]
    fn ipv6_clients_share_a_key_per_slash_64() {
        let k = |s: &str| rate_key(s.parse().expect("ip"));
        assert_eq!(k("2001:db8:1:2:aaaa::1"), k("2001:db8:1:2:ffff::9"));
        assert_ne!(k("2001:db8:1:2::1"), k("2001:db8:1:3::1"));
        assert_eq!(k("2001:db8:1:2:aaaa::1"), k("2001:db8:1:2::"));
        assert_eq!(k("::ffff:192.0.2.1"), k("192.0.2.1"));
        assert_ne!(k("192.0.2.1"), k("192.0.2.2"));
    }
}
