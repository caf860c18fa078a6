//! The admission-token policy both sides must agree on (DECISIONS "Tokens, capacity and
//! clocks"): the waiting room publishes it beside its JWKS
//! (`/.well-known/admission-policy.json`: `issuer`, `audience`, `max_clock_skew_secs`,
//! `door_exp_leeway_secs`); the door compares its own configuration at start and refuses to start
//! when they differ, because a door with another skew or leeway would accept a token after the
//! waiting room handed its capacity slot to the next fan (case W10) or turn fresh tokens away
//! (case W11).
//!
//! Layer: door (imports nothing from the crate).

use std::time::Duration;

use serde::Deserialize;

/// The published policy (the fields the door checks; others are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Policy {
    /// `iss` of admission tokens.
    pub issuer: String,
    /// `aud` of admission tokens.
    pub audience: String,
    /// Largest clock difference between services, **seconds**.
    pub max_clock_skew_secs: u64,
    /// Leeway the door may apply to `exp` and `nbf`, **seconds** (0: skew is absorbed by the
    /// waiting room's `nbf` and slot tail).
    pub door_exp_leeway_secs: u64,
}

/// What the start-up check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The waiting room's policy equals this door's configuration.
    Agrees,
    /// The policy could not be read (the waiting room is down or older); the door starts and
    /// says so in its log.
    Unreachable(String),
}

/// The policy URL beside a JWKS URL: `…/.well-known/jwks.json` → `…/.well-known/admission-policy.json`.
pub fn policy_url(jwks_url: &str) -> String {
    match jwks_url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/admission-policy.json"),
        None => format!("{jwks_url}/admission-policy.json"),
    }
}

/// Every field where `ours` differs from `theirs`, as `field: ours X, waiting room Y`.
pub fn differences(ours: &Policy, theirs: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    if ours.issuer != theirs.issuer {
        out.push(format!(
            "issuer: ours {:?}, waiting room {:?}",
            ours.issuer, theirs.issuer
        ));
    }
    if ours.audience != theirs.audience {
        out.push(format!(
            "audience: ours {:?}, waiting room {:?}",
            ours.audience, theirs.audience
        ));
    }
    if ours.max_clock_skew_secs != theirs.max_clock_skew_secs {
        out.push(format!(
            "max_clock_skew_secs: ours {}, waiting room {}",
            ours.max_clock_skew_secs, theirs.max_clock_skew_secs
        ));
    }
    if ours.door_exp_leeway_secs != theirs.door_exp_leeway_secs {
        out.push(format!(
            "leeway_secs: ours {}, waiting room's door_exp_leeway_secs {}",
            ours.door_exp_leeway_secs, theirs.door_exp_leeway_secs
        ));
    }
    out
}

/// Reads the policy beside `jwks_url` (one attempt, bounded by `timeout`) and compares it.
///
/// Errors: the policy was read and differs from `ours` (the message names every field).
pub async fn check(jwks_url: &str, ours: &Policy, timeout: Duration) -> anyhow::Result<Check> {
    let url = policy_url(jwks_url);
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .unwrap_or_default();
    let theirs: Policy = match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => match r.json().await {
            Ok(p) => p,
            Err(e) => return Ok(Check::Unreachable(format!("{url}: {e}"))),
        },
        Ok(r) => return Ok(Check::Unreachable(format!("{url}: HTTP {}", r.status()))),
        Err(e) => return Ok(Check::Unreachable(format!("{url}: {e}"))),
    };
    let diff = differences(ours, &theirs);
    anyhow::ensure!(
        diff.is_empty(),
        "the booking door's token settings differ from the waiting room's ({url}): {}; set \
         both from one value (DECISIONS \"Tokens, capacity and clocks\")",
        diff.join("; ")
    );
    Ok(Check::Agrees)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(skew: u64, leeway: u64) -> Policy {
        Policy {
            issuer: "waiting-room".into(),
            audience: "booking-core".into(),
            max_clock_skew_secs: skew,
            door_exp_leeway_secs: leeway,
        }
    }

    #[test]
    fn policy_sits_beside_the_jwks() {
        assert_eq!(
            policy_url("http://wr:8080/.well-known/jwks.json"),
            "http://wr:8080/.well-known/admission-policy.json"
        );
    }

    #[test]
    fn differences_name_each_field() {
        assert!(differences(&p(30, 0), &p(30, 0)).is_empty());
        let d = differences(&p(30, 5), &p(10, 0));
        assert_eq!(d.len(), 2);
        assert!(d[0].starts_with("max_clock_skew_secs") && d[1].starts_with("leeway_secs"));
    }
}
