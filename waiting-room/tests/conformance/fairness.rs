//! Conformance rules for fair order: the pre-queue's draw is uniform (a χ² test on which
//! arrival slot lands first over many openings), it numbers fans in the published draw's order,
//! and, after opening, admission order equals queue order. Run against every backend by `tests/conformance.rs`.

use super::{create, ev, join, params, Store, NOW, REJOIN, TERMS};
use waiting_room::admitter::open_event;
use waiting_room::domain::{ClaimOutcome, EventId, EventMeta, EventState, VisitorId};
use waiting_room::draw::{public_id, verify, DrawSeed};
use waiting_room::store::draw::publication;

/// Arrival slots in each pre-queue.
const SLOTS: usize = 6;
/// Openings observed.
const OPENINGS: usize = 600;
/// χ² critical value for 5 degrees of freedom at p = 0.001: a fair shuffle fails this test
/// once in a thousand runs.
const CHI2_CRITICAL: f64 = 20.515;

pub async fn prequeue_shuffle_is_uniform(s: Store) {
    let mut first = [0usize; SLOTS];
    for i in 0..OPENINGS {
        let id = EventId::parse(&format!("{}-fair-{i}", ev())).expect("id");
        let meta = EventMeta {
            id: id.clone(),
            state: EventState::Prequeue,
            opens_at: NOW,
            admit_rate: 1.0,
            max_active: 1,
            admission_ttl_secs: 600,
            booking_url: String::new(),
            pow_bits: 0,
            stock_wait: 0,
            time_zone: "UTC".into(),
        };
        s.create_event(&meta).await.expect("create");
        let fans: Vec<VisitorId> = (0..SLOTS).map(|_| VisitorId::random()).collect();
        for f in &fans {
            s.join(&id, f, NOW * 1000, REJOIN).await.expect("join");
        }
        open_event(s.as_ref(), &id).await.expect("open");
        let mut winner = None;
        for (slot, f) in fans.iter().enumerate() {
            if s.position(&id, f).await.expect("pos").queue_number == Some(1) {
                assert!(winner.replace(slot).is_none(), "one number 1");
            }
        }
        first[winner.expect("someone is first")] += 1;
    }
    let expected = OPENINGS as f64 / SLOTS as f64;
    let chi2: f64 = first
        .iter()
        .map(|&o| (o as f64 - expected).powi(2) / expected)
        .sum();
    assert!(
        chi2 < CHI2_CRITICAL,
        "first places by arrival slot {first:?}: χ² = {chi2:.2} ≥ {CHI2_CRITICAL}"
    );
}

pub async fn admission_order_equals_queue_order_after_opening(s: Store) {
    create(&s, 1000).await;
    open_event(s.as_ref(), &ev()).await.expect("open");
    let mut fans = Vec::new();
    for _ in 0..40 {
        let f = VisitorId::random();
        assert_eq!(
            join(&s, &f).await,
            Some(fans.len() as u64 + 1),
            "FIFO numbers"
        );
        fans.push(f);
    }
    for k in 0..fans.len() {
        let a = s
            .advance_cursor(&ev(), &params(1, 1000, NOW, 60))
            .await
            .expect("advance");
        assert_eq!((a.cursor, a.moved), (k as u64 + 1, 1));
        let claim = |i: usize| {
            let (s, f) = (s.clone(), fans[i].clone());
            async move {
                s.claim(&ev(), &f, NOW * 1000, TERMS, &format!("j{i}"), REJOIN)
                    .await
                    .expect("claim")
            }
        };
        if k + 1 < fans.len() {
            assert!(
                matches!(claim(k + 1).await, ClaimOutcome::NotYourTurn { .. }),
                "number {} is not admitted before number {}",
                k + 2,
                k + 1
            );
        }
        assert!(
            matches!(claim(k).await, ClaimOutcome::Admitted(_)),
            "fan {k}"
        );
    }
}

/// The pre-queue is numbered in draw order (issue 15 item 1): whatever the chunk size, each
/// pre-queued fan's number is its place in (HMAC rank, public id) order, the publication
/// recomputes, and the seed stays the one committed before opening.
pub async fn prequeue_numbers_follow_the_published_draw(s: Store) {
    create(&s, 10).await;
    let before = publication(s.as_ref(), &ev()).await.expect("publication");
    assert!(
        before.seed.is_none(),
        "the seed stays secret before opening"
    );
    let fans: Vec<VisitorId> = (0..250).map(|_| VisitorId::random()).collect();
    for f in &fans {
        assert_eq!(join(&s, f).await, None);
    }
    assert_eq!(s.begin_open(&ev()).await.expect("begin"), 250);
    while s.open_chunk(&ev(), 37).await.expect("chunk") > 0 {}
    let p = publication(s.as_ref(), &ev()).await.expect("publication");
    assert_eq!(p.commitment, before.commitment);
    let positions = verify(&p).expect("the published draw verifies");
    let seed = DrawSeed::from_hex(p.seed.as_deref().expect("seed")).expect("hex");
    let mut expected: Vec<(u64, String)> = fans
        .iter()
        .map(|f| {
            let id = public_id(f.as_str());
            (seed.rank(&id), id)
        })
        .collect();
    expected.sort();
    for (i, (_, id)) in expected.iter().enumerate() {
        assert_eq!(positions[i], (i as u64 + 1, id.clone()), "number {}", i + 1);
    }
    for f in &fans {
        let n = s.position(&ev(), f).await.expect("pos").queue_number;
        let id = public_id(f.as_str());
        let at = expected.iter().position(|(_, e)| *e == id).expect("listed");
        assert_eq!(n, Some(at as u64 + 1));
    }
}
