//! The quiet lane's store rules (issue 15 item 2): address rules are stored, listed and deleted
//! per event; the shadow line numbers from its own counter (the fans' numbers, counter and
//! figures never move), a repeat is the same entry, an entry leaves only when removed, and the
//! operator's list is in shadow-number order.

use super::{create, ev, join, open_with, Store};
use waiting_room::domain::{EventId, VisitorId};
use waiting_room::lanes::{AddressRule, RuleAction, ShadowEntry, ShadowTag};

fn rule(id: &str, cidr: &str, action: RuleAction) -> AddressRule {
    AddressRule {
        id: id.into(),
        cidr: cidr.into(),
        action,
        pow_bits: None,
        note: "why".into(),
        created_by: "olga".into(),
        created_at: super::NOW,
    }
}

pub async fn address_rules_are_stored_per_event(s: Store) {
    create(&s, 10).await;
    let a = rule("r1", "203.0.113.0/24", RuleAction::Shadow);
    let b = AddressRule {
        pow_bits: Some(12),
        ..rule("r2", "2001:db8::/32", RuleAction::Challenge)
    };
    let added = waiting_room::store::RuleAdded::Added;
    assert_eq!(s.put_rule(&ev(), &a, 2).await.expect("put"), added);
    assert_eq!(s.put_rule(&ev(), &b, 2).await.expect("put"), added);
    // One rule per range, and the cap, in the same atomic step.
    let again = rule("r9", "203.0.113.0/24", RuleAction::Block);
    assert_eq!(
        s.put_rule(&ev(), &again, 10).await.expect("put"),
        waiting_room::store::RuleAdded::SameRange(a.clone())
    );
    let third = rule("r3", "198.51.100.0/24", RuleAction::Block);
    assert_eq!(
        s.put_rule(&ev(), &third, 2).await.expect("put"),
        waiting_room::store::RuleAdded::Full
    );
    let mut got = s.rules(&ev()).await.expect("rules");
    got.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(got, vec![a.clone(), b]);
    assert_eq!(s.delete_rule(&ev(), "r1").await.expect("del"), Some(a));
    assert_eq!(s.delete_rule(&ev(), "r1").await.expect("del"), None);
    assert_eq!(s.rules(&ev()).await.expect("rules").len(), 1);
    let nope = EventId::parse("no-such-event").expect("id");
    assert!(s.rules(&nope).await.is_err(), "unknown event");
    assert!(s
        .put_rule(&nope, &rule("r", "10.0.0.0/8", RuleAction::Block), 10)
        .await
        .is_err());
}

fn entry(v: &str, rule: &str) -> ShadowEntry {
    ShadowEntry {
        visitor: v.into(),
        shadow_number: 99,
        behind: 99,
        rule: rule.into(),
        address: "203.0.113.9".into(),
        at_ms: super::NOW * 1000,
    }
}

pub async fn the_shadow_line_has_its_own_numbers(s: Store) {
    open_with(&s, 10).await;
    let tag = ShadowTag::new(b"conformance");
    let fans: Vec<VisitorId> = (0..3).map(|_| VisitorId::random()).collect();
    assert_eq!(join(&s, &fans[0]).await, Some(1));
    assert_eq!(join(&s, &fans[1]).await, Some(2));
    let before = s
        .figures(&ev(), super::NOW * 1000, super::SILENCE)
        .await
        .expect("f");
    let bots: Vec<String> = (0..3).map(|_| tag.mint()).collect();
    let mut got = Vec::new();
    for b in &bots {
        got.push(
            s.shadow_join(&ev(), &entry(b, "r1"))
                .await
                .expect("shadow join"),
        );
    }
    assert_eq!(
        got.iter()
            .map(|e| (e.shadow_number, e.behind))
            .collect::<Vec<_>>(),
        [(1, 2), (2, 2), (3, 2)],
        "own counter; behind the two fans numbered"
    );
    assert_eq!(got[0].shown_number(), 3);
    let again = s
        .shadow_join(&ev(), &entry(&bots[0], "other"))
        .await
        .expect("again");
    assert_eq!(again, got[0], "a repeat keeps the entry");
    let after = s
        .figures(&ev(), super::NOW * 1000, super::SILENCE)
        .await
        .expect("f");
    assert_eq!(before, after, "the fans' figures do not move");
    assert_eq!(
        join(&s, &fans[2]).await,
        Some(3),
        "the fans' counter did not move"
    );
    let v0 = VisitorId::from_verified(bots[0].clone());
    assert_eq!(
        s.shadow_entry(&ev(), &v0).await.expect("get"),
        Some(got[0].clone())
    );
    assert_eq!(s.shadow_entry(&ev(), &fans[0]).await.expect("get"), None);
    assert_eq!(s.shadow_list(&ev(), 10).await.expect("list"), got);
    assert_eq!(s.shadow_list(&ev(), 1).await.expect("list").len(), 1);
    assert_eq!(
        s.shadow_remove(&ev(), &v0).await.expect("rm"),
        Some(got[0].clone())
    );
    assert_eq!(s.shadow_remove(&ev(), &v0).await.expect("rm"), None);
    assert_eq!(s.shadow_entry(&ev(), &v0).await.expect("get"), None);
    assert_eq!(s.shadow_list(&ev(), 10).await.expect("list").len(), 2);
    let nope = EventId::parse("no-such-event").expect("id");
    assert!(s.shadow_join(&nope, &entry(&bots[1], "r1")).await.is_err());
}
