//! Tier-only sections (issue 14 item 3) on SQLite and PostgreSQL: a venue tier marked
//! `restricted` reserves its sections for fans whose admission token's `tier` claim names it
//! (the waiting room passes on the tier of the fan's access code or invitation). Without it, or
//! with another tier, a hold of its seats or a best-available pick in it is `403 tier-required`
//! naming the section and its tiers; other sections stay open to everyone.

mod support;

use booking_core::Venue;
use serde_json::{json, Value};
use support::{claims, Backend, Harness, SHOW};

on_both!(tier_only_sections_are_held_only_with_the_tier);

fn token(h: &Harness, sub: &str, tier: Option<&str>) -> String {
    let mut c = claims(sub, SHOW, &format!("jti-{sub}"), h.now_s());
    if let Some(t) = tier {
        c["tier"] = t.into();
    }
    h.signer.sign(&c)
}

async fn tier_only_sections_are_held_only_with_the_tier(b: Backend) {
    let venue: Venue = serde_json::from_value(json!({
        "name": "tiered",
        "sections": [{"name": "A", "price_cents": 5000}, {"name": "B", "price_cents": 9000}],
        "rows": 1,
        "seats_per_row": 3,
        "tiers": [{"name": "vip", "sections": ["B"], "restricted": true},
                  {"name": "standard", "sections": ["A"]}],
    }))
    .expect("venue");
    let h = Harness::on_with(b, |c| c.shows[0].venue = venue).await;
    let kind = |v: &Value| v["type"].as_str().unwrap_or("").to_owned();

    let plain = token(&h, "fan-plain", None);
    let (st, v) = h.hold(&plain, "k1", &["B-1-1"]).await;
    assert_eq!(
        (st, kind(&v).as_str()),
        (403, "/problems/tier-required"),
        "{v}"
    );
    assert_eq!(
        (v["section"].as_str(), v["tiers"].clone()),
        (Some("B"), json!(["vip"]))
    );
    let best = json!({"best_available": {"section": "B", "quantity": 1, "allow_split": false}});
    let (st, _) = h.hold_with(&plain, "k2", best.clone(), &[]).await;
    assert_eq!(st, 403);
    let (st, v) = h.hold(&plain, "k3", &["A-1-1"]).await;
    assert_eq!(
        st, 201,
        "an unrestricted tier's section is open to everyone: {v}"
    );

    let other = token(&h, "fan-other", Some("standard"));
    let (st, _) = h.hold(&other, "k4", &["B-1-1"]).await;
    assert_eq!(st, 403, "another tier does not open it");

    let vip = token(&h, "fan-vip", Some("vip"));
    let (st, v) = h.hold(&vip, "k5", &["B-1-1"]).await;
    assert_eq!(st, 201, "{v}");
    let vip2 = token(&h, "fan-vip2", Some("vip"));
    let (st, v) = h.hold_with(&vip2, "k6", best, &[]).await;
    assert_eq!(st, 201, "{v}");
}
