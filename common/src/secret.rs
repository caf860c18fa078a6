//! Secrets in configuration: [`Secret`] never prints its value in `Debug` or logs (STYLE.md rule 7).

/// A secret string (admin tokens, HMAC keys). `Debug` prints `Secret(***)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret itself; call only where it is used (signing, comparing).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.expose(), "hunter2");
    }
}

/// The bearer token of a request's ONE `Authorization` header (`Bearer <token>`, the scheme as
/// written here); `""` when there is none, it is not a bearer, not visible ASCII, or the
/// header is sent more than once (a request carries one set of credentials, RFC 9110
/// §11.6.2; the first used to win, whatever a proxy in front had checked). For comparing with
/// an operator's or a service's token, which `""` never matches.
pub fn bearer(headers: &axum::http::HeaderMap) -> &str {
    let mut all = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    match (all.next(), all.next()) {
        (Some(v), None) => v
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or(""),
        _ => "",
    }
}

#[cfg(test)]
mod bearer_tests {
    use super::bearer;
    use axum::http::{header::AUTHORIZATION, HeaderMap};

    #[test]
    fn one_bearer_header_or_nothing() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), "");
        h.insert(AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert_eq!(bearer(&h), "s3cret");
        h.append(AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert_eq!(bearer(&h), "");
        let mut basic = HeaderMap::new();
        basic.insert(AUTHORIZATION, "Basic czNjcmV0".parse().unwrap());
        assert_eq!(bearer(&basic), "");
    }
}
