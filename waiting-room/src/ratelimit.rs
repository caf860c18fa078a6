//! Per-client-IP rate limiting of joins (tower_governor) with a key extractor that believes
//! `X-Forwarded-For` only from configured proxies (case W03): the key is the peer IP, unless the
//! peer is a trusted proxy, in which case it is the rightmost hop that is not a trusted proxy.

use axum::extract::connect_info::MockConnectInfo;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::GovernorError;

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
}

impl KeyExtractor for TrustedProxyKey {
    type Key = IpAddr;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        let peer = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
            .or_else(|| {
                // Router tests provide the peer through `MockConnectInfo`.
                req.extensions()
                    .get::<MockConnectInfo<SocketAddr>>()
                    .map(|c| c.0.ip())
            })
            .ok_or(GovernorError::UnableToExtractKey)?;
        Ok(client_ip(peer, req.headers(), &self.trusted))
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
}
