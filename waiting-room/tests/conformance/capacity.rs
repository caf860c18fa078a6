//! Capacity is exact (DESIGN "Scale and operations", case W10): live admissions the booking door
//! would accept never exceed `max_active`, at any instant, clock-skew tail included.

use super::{advance, beat, create, ev, join, Store, NOW, REJOIN, SILENCE};
use waiting_room::admitter::open_event;
use waiting_room::domain::{AdmissionTerms, ClaimOutcome, VisitorId};

/// Case W10's event: `max_active` 1, admissions of 20 s, doors up to 30 s behind.
const W10: AdmissionTerms = AdmissionTerms::new(20, 30);

async fn claim(s: &Store, v: &VisitorId, now_s: i64, jti: &str) -> ClaimOutcome {
    s.claim(&ev(), v, now_s * 1000, W10, jti, REJOIN)
        .await
        .expect("claim")
}

async fn active(s: &Store, now_s: i64) -> u64 {
    s.figures(&ev(), now_s * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists")
        .active
}

/// Fan A's token expires at t0+20, but a door 30 s behind accepts it until t0+50 (its time):
/// fan B is invited only then. Without the tail B was admitted at t0+20 and both could hold.
pub async fn case_w10_slot_ends_after_exp_plus_skew(s: Store) {
    create(&s, 1).await;
    open_event(s.as_ref(), &ev()).await.expect("open");
    let (a, b) = (VisitorId::random(), VisitorId::random());
    join(&s, &a).await;
    join(&s, &b).await;
    assert_eq!(advance(&s, 10, 1, NOW, 60).await.moved, 1);
    let ClaimOutcome::Admitted(adm) = claim(&s, &a, NOW, "a").await else {
        panic!("A is admitted");
    };
    assert_eq!(adm.exp, NOW + 20, "the token itself lives 20 s");
    for t in [NOW + 20, NOW + 35, NOW + 49] {
        assert_eq!(
            advance(&s, 10, 1, t, 60).await.moved,
            0,
            "at t0+{}: A's slot is still taken",
            t - NOW
        );
        assert_eq!(active(&s, t).await, 1);
    }
    beat(&s, std::slice::from_ref(&b), NOW + 45).await;
    assert_eq!(
        advance(&s, 10, 1, NOW + 50, 60).await.moved,
        1,
        "freed at exp + skew"
    );
    assert!(matches!(
        claim(&s, &b, NOW + 50, "b").await,
        ClaimOutcome::Admitted(_)
    ));
    assert_eq!(active(&s, NOW + 50).await, 1);
}

/// A fan whose invitation lapsed unclaimed claims after the cursor gave the slot to the next
/// fan: the claim waits for the next free slot (first in line) instead of pushing the live
/// count over `max_active` (the overshoot ARCHITECTURE.md used to accept).
pub async fn case_w10_lapsed_invitation_never_overshoots(s: Store) {
    create(&s, 1).await;
    open_event(s.as_ref(), &ev()).await.expect("open");
    let (a, b, c) = (
        VisitorId::random(),
        VisitorId::random(),
        VisitorId::random(),
    );
    for v in [&a, &b, &c] {
        join(&s, v).await;
    }
    assert_eq!(
        advance(&s, 10, 1, NOW, 5).await.moved,
        1,
        "A invited for 5 s"
    );
    assert_eq!(
        advance(&s, 10, 1, NOW + 6, 5).await.moved,
        1,
        "A's invitation lapsed: B"
    );
    assert!(matches!(
        claim(&s, &b, NOW + 6, "b").await,
        ClaimOutcome::Admitted(_)
    ));
    assert_eq!(
        claim(&s, &a, NOW + 7, "a").await,
        ClaimOutcome::Returning { queue_number: 1 },
        "no free slot: A waits, first in line"
    );
    assert_eq!(active(&s, NOW + 7).await, 1, "never two live admissions");
    // B's slot ends at exp + tail = NOW + 6 + 20 + 30; the next tick invites A before C.
    beat(&s, std::slice::from_ref(&c), NOW + 50).await;
    let next = advance(&s, 10, 1, NOW + 56, 5).await;
    assert_eq!(
        (next.returned, next.moved),
        (1, 0),
        "returning A first, C not yet"
    );
    assert!(matches!(
        claim(&s, &a, NOW + 56, "a2").await,
        ClaimOutcome::Admitted(_)
    ));
    assert_eq!(active(&s, NOW + 56).await, 1);
    assert!(matches!(
        claim(&s, &c, NOW + 56, "c").await,
        ClaimOutcome::NotYourTurn { .. }
    ));
}
