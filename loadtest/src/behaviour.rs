//! Fan behaviour mixes for the rehearsal: how a fan holds (one request; the same request sent
//! twice with one `Idempotency-Key`; several browser tabs holding at once with one admission
//! token) and how it checks out (pay, pay slowly, pay after the deadline, cancel, walk away).
//! The shares come from `rush` flags or a `--profile`; [`Mix::pick`] draws one fan's behaviour.

use crate::calls::call;
use crate::model::{Behaviour, Checkout, FanOutcome, HoldStyle, Target};
use crate::picks::Pick;
use crate::stats::Stats;
use rand::Rng;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::time::Duration;

fn key() -> String {
    format!("{:032x}", rand::thread_rng().gen::<u128>())
}

fn hold_req(
    client: &Client,
    t: &Target,
    adm: &str,
    key: &str,
    pick: &Pick,
) -> reqwest::RequestBuilder {
    client
        .post(format!("{}/api/shows/{}/holds", t.booking, t.event))
        .bearer_auth(adm)
        .header("Idempotency-Key", key)
        .json(&pick.body())
}

/// Sends one hold attempt in the fan's style; answers like a single hold call (status, body).
/// Records what the style revealed in `out` (`idempotency_mismatch`, `tabs_won`).
pub async fn send_hold(
    client: &Client,
    stats: &Stats,
    t: &Target,
    adm: &str,
    seats: &Pick,
    alternatives: &[Pick],
    out: &mut FanOutcome,
) -> anyhow::Result<(StatusCode, Value)> {
    match out.behaviour.hold {
        HoldStyle::Single => {
            let (s, b, _) = call(
                client,
                stats,
                "hold",
                hold_req(client, t, adm, &key(), seats),
            )
            .await?;
            Ok((s, b))
        }
        HoldStyle::SameKeyRetry => {
            let k = key();
            let (a, b) = tokio::join!(
                call(client, stats, "hold", hold_req(client, t, adm, &k, seats)),
                call(client, stats, "hold", hold_req(client, t, adm, &k, seats))
            );
            let ((sa, ba, _), (sb, bb, _)) = (a?, b?);
            let won = |s: StatusCode| s == StatusCode::CREATED || s == StatusCode::OK;
            // One may meet the other in flight (409 concurrent-request); a third send after both
            // answered must return the stored answer.
            let (s3, b3, _) =
                call(client, stats, "hold", hold_req(client, t, adm, &k, seats)).await?;
            let ids: Vec<&str> = [(&sa, &ba), (&sb, &bb), (&s3, &b3)]
                .iter()
                .filter(|(s, _)| won(**s))
                .filter_map(|(_, b)| b["hold_id"].as_str())
                .collect();
            // A 401 on the third send is the door (the admission expired meanwhile): the
            // stored answer was not reached, so that pair is not judged.
            let judged = s3 != StatusCode::UNAUTHORIZED;
            out.idempotent_checked = true;
            if ids.windows(2).any(|w| w[0] != w[1]) || (judged && won(sa) && !won(s3)) {
                out.idempotency_mismatch = true;
            }
            Ok(if won(s3) {
                (s3, b3)
            } else if won(sa) {
                (sa, ba)
            } else {
                (sb, bb)
            })
        }
        HoldStyle::Tabs(n) => {
            let mut reqs = vec![hold_req(client, t, adm, &key(), seats)];
            for alt in alternatives.iter().take(n.saturating_sub(1)) {
                reqs.push(hold_req(client, t, adm, &key(), alt));
            }
            let answers =
                futures::future::join_all(reqs.into_iter().map(|r| call(client, stats, "hold", r)))
                    .await;
            let mut first_win = None;
            let mut last = None;
            let mut wins = 0;
            for a in answers.into_iter().flatten() {
                if a.0 == StatusCode::CREATED || a.0 == StatusCode::OK {
                    wins += 1;
                    first_win.get_or_insert((a.0, a.1.clone()));
                }
                last = Some((a.0, a.1));
            }
            out.tabs_won = Some(wins);
            first_win
                .or(last)
                .ok_or_else(|| anyhow::anyhow!("every tab failed"))
        }
    }
}

/// Waits before pressing Pay as the fan's checkout style says (`payment_expires_at`: epoch s).
pub async fn before_pay(b: Behaviour, payment_expires_at: Option<i64>) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let left = payment_expires_at.map_or(0, |d| (d - now).max(0));
    let wait = match b.checkout {
        Checkout::PaySlowly => Duration::from_millis((left as u64 * 1000) / 2),
        Checkout::PayLate => Duration::from_secs(left as u64 + 1),
        _ => Duration::ZERO,
    };
    tokio::time::sleep(wait).await;
}

/// The checkout page button for this behaviour, `None` to walk away.
pub fn button(b: Behaviour) -> Option<&'static str> {
    match b.checkout {
        Checkout::Pay | Checkout::PaySlowly | Checkout::PayLate => Some("pay"),
        Checkout::Cancel => Some("cancel"),
        Checkout::WalkAway => None,
    }
}
