//! Conformance rules for liveness (case W06), session end and the audit trail; run against
//! every backend by the `conformance!` macro in `tests/conformance.rs`. Time is a `ManualClock`
//! and the admitter is stepped by hand.

use super::{create, ev, join, Store, NOW, REJOIN, SILENCE, TERMS};
use sale_common::{Clock, ManualClock};
use serde_json::json;
use waiting_room::admitter::{open_event, Admitter, LivenessRules};
use waiting_room::domain::{AuditEntry, ClaimOutcome, Place, SessionEnd, SessionRef, VisitorId};

fn rules(window: u64) -> LivenessRules {
    LivenessRules {
        silence_ms: SILENCE,
        ready_window_secs: 0,
        ready_window_min: window,
        scan_limit: 10_000,
    }
}

async fn open_now(s: &Store, max_active: u64) {
    create(s, max_active).await;
    open_event(s.as_ref(), &ev()).await.expect("open");
}

async fn fans(s: &Store, n: usize) -> Vec<VisitorId> {
    let mut v = Vec::new();
    for _ in 0..n {
        let f = VisitorId::random();
        join(s, &f).await;
        v.push(f);
    }
    v
}

async fn beat(s: &Store, f: &VisitorId, clock: &ManualClock) -> Place {
    s.heartbeat(&ev(), f, clock.now_ms(), REJOIN)
        .await
        .expect("heartbeat")
        .place
}

async fn claim(s: &Store, f: &VisitorId, clock: &ManualClock, jti: &str) -> ClaimOutcome {
    s.claim(&ev(), f, clock.now_ms(), TERMS, jti, REJOIN)
        .await
        .expect("claim")
}

/// Steps the admitter every 100 ms for `ms` milliseconds.
async fn run(adm: &mut Admitter, clock: &ManualClock, ms: i64) {
    for _ in 0..ms / 100 {
        clock.advance_ms(100);
        adm.step(clock.now_ms()).await.expect("step");
    }
}

fn admitted(c: &ClaimOutcome) -> bool {
    matches!(c, ClaimOutcome::Admitted(_))
}

pub async fn case_w06_abandoned_places_are_skipped(s: Store) {
    let clock = ManualClock::new(NOW * 1000);
    open_now(&s, 10).await;
    s.set_knobs(&ev(), Some(100.0), None).await.expect("knobs");
    let fans = fans(&s, 30).await;
    let mut adm = Admitter::new(s.clone(), ev(), 100, 60).with_rules(rules(100));
    run(&mut adm, &clock, 1000).await;
    for (i, f) in fans[..10].iter().enumerate() {
        assert!(admitted(&claim(&s, f, &clock, &format!("j{i}")).await));
    }
    // 40 s pass: fans 21..=30 heartbeat every 10 s, fans 11..=20 have gone silent.
    for _ in 0..4 {
        for f in &fans[20..] {
            assert_eq!(beat(&s, f, &clock).await, Place::Ready);
        }
        run(&mut adm, &clock, 10_000).await;
    }
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!((f.cursor, f.silent), (10, 10));
    assert_eq!(
        f.queue_length(),
        10,
        "only the 10 live fans count as waiting"
    );
    // The 10 admitted sessions end (booking paid or left), reported by jti and by visitor.
    for (i, f) in fans[..10].iter().enumerate() {
        let by = if i % 2 == 0 {
            SessionRef::Jti(format!("j{i}"))
        } else {
            SessionRef::Visitor(f.as_str().to_owned())
        };
        let end = s
            .end_session(&ev(), &by, clock.now_secs())
            .await
            .expect("end");
        assert_eq!(end, SessionEnd::Ended);
    }
    // Within one grace period every live fan is let in; the silent places are skipped.
    let deadline = clock.now_ms() + SILENCE as i64;
    let mut admitted_live = 0;
    while clock.now_ms() < deadline && admitted_live < 10 {
        run(&mut adm, &clock, 100).await;
        admitted_live = 0;
        for f in &fans[20..] {
            if admitted(&claim(&s, f, &clock, "late").await) {
                admitted_live += 1;
            }
        }
    }
    assert_eq!(admitted_live, 10, "the next 10 live fans are admitted");
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!((f.cursor, f.skipped_total, f.active), (30, 10, 10));
    assert_eq!(f.queue_length(), 0);
}

pub async fn skipped_fan_back_in_time_is_admitted_next_tick(s: Store) {
    let clock = ManualClock::new(NOW * 1000);
    open_now(&s, 100).await;
    let fans = fans(&s, 4).await;
    let mut adm = Admitter::new(s.clone(), ev(), 100, 60).with_rules(rules(100));
    adm.step(clock.now_ms()).await.expect("stamps the window");
    s.set_knobs(&ev(), Some(0.5), None).await.expect("slow");
    clock.advance_ms(SILENCE as i64 + 1000);
    for f in &fans[2..] {
        assert_eq!(beat(&s, f, &clock).await, Place::Ready);
    }
    // 0.5/s over 6 s: three invitations; fans 1 and 2 are silent and skipped on the way.
    run(&mut adm, &clock, 6000).await;
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!((f.cursor, f.skipped_total), (4, 2));
    // Fan 1 comes back within the rejoin grace: kept, invited at the next tick.
    assert_eq!(beat(&s, &fans[0], &clock).await, Place::Returning);
    assert!(matches!(
        claim(&s, &fans[0], &clock, "r").await,
        ClaimOutcome::Returning { queue_number: 1 }
    ));
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!(f.returning, 1);
    run(&mut adm, &clock, 2000).await;
    assert!(admitted(&claim(&s, &fans[0], &clock, "r").await));
    // Fan 2 comes back too late: the place is lost, a join gives a new one at the back.
    clock.advance_ms(REJOIN as i64 + 1000);
    assert_eq!(beat(&s, &fans[1], &clock).await, Place::Lost);
    assert!(matches!(
        claim(&s, &fans[1], &clock, "x").await,
        ClaimOutcome::Lost { queue_number: 2 }
    ));
    let again = s
        .join(&ev(), &fans[1], clock.now_ms(), REJOIN)
        .await
        .expect("join");
    assert_eq!(again.queue_number, Some(5));
}

pub async fn fans_behind_the_ready_window_need_not_heartbeat(s: Store) {
    let clock = ManualClock::new(NOW * 1000);
    open_now(&s, 1000).await;
    s.set_knobs(&ev(), Some(1.0), None).await.expect("knobs");
    let fans = fans(&s, 20).await;
    let mut adm = Admitter::new(s.clone(), ev(), 100, 60).with_rules(rules(5));
    adm.step(clock.now_ms()).await.expect("step");
    assert_eq!(beat(&s, &fans[2], &clock).await, Place::Ready);
    assert_eq!(beat(&s, &fans[15], &clock).await, Place::Waiting);
    // One place per second, window of 5: each fan is reached ~5 s after entering the window,
    // well within the 30 s grace the window entry gives, so nobody silent is skipped.
    run(&mut adm, &clock, 25_000).await;
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!((f.cursor, f.skipped_total), (20, 0));
    assert_eq!(beat(&s, &fans[0], &clock).await, Place::YourTurn);
    assert!(admitted(&claim(&s, &fans[0], &clock, "a").await));
    assert_eq!(beat(&s, &fans[0], &clock).await, Place::Admitted);
    let pre = VisitorId::random();
    assert_eq!(beat(&s, &pre, &clock).await, Place::Unnumbered);
}

pub async fn session_end_frees_the_slot_once(s: Store) {
    let clock = ManualClock::new(NOW * 1000);
    open_now(&s, 1).await;
    let fans = fans(&s, 2).await;
    let mut adm = Admitter::new(s.clone(), ev(), 100, 60).with_rules(rules(100));
    run(&mut adm, &clock, 1000).await;
    assert!(admitted(&claim(&s, &fans[0], &clock, "jti-a").await));
    beat(&s, &fans[1], &clock).await;
    run(&mut adm, &clock, 1000).await;
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!(
        (f.cursor, f.active),
        (1, 1),
        "max_active 1 holds the cursor"
    );
    let now = clock.now_secs();
    let end = |r: SessionRef| {
        let s = s.clone();
        async move { s.end_session(&ev(), &r, now).await.expect("end") }
    };
    assert_eq!(
        end(SessionRef::Jti("jti-a".into())).await,
        SessionEnd::Ended
    );
    assert_eq!(
        end(SessionRef::Jti("jti-a".into())).await,
        SessionEnd::AlreadyEnded
    );
    let by_visitor = SessionRef::Visitor(fans[0].as_str().to_owned());
    assert_eq!(end(by_visitor).await, SessionEnd::AlreadyEnded);
    assert_eq!(
        end(SessionRef::Jti("nope".into())).await,
        SessionEnd::Unknown
    );
    let stranger = SessionRef::Visitor(VisitorId::random().as_str().to_owned());
    assert_eq!(end(stranger).await, SessionEnd::Unknown);
    run(&mut adm, &clock, 200).await;
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!((f.cursor, f.active, f.ended_total), (2, 1, 1));
    assert!(admitted(&claim(&s, &fans[0], &clock, "again").await));
    let f = s
        .figures(&ev(), clock.now_ms(), SILENCE)
        .await
        .expect("fig")
        .expect("ev");
    assert_eq!(
        f.active, 1,
        "claiming again after the end takes no new slot"
    );
}

pub async fn audit_trail_keeps_actions_in_order(s: Store) {
    create(&s, 10).await;
    assert!(s.audit(&ev(), 10).await.expect("audit").is_empty());
    for (i, what) in ["set_admit_rate", "pause", "resume"].iter().enumerate() {
        let e = AuditEntry {
            at: NOW + i as i64,
            operator: "alice".into(),
            action: (*what).into(),
            old: json!(i),
            new: json!({"v": i + 1}),
        };
        s.audit_append(&ev(), &e).await.expect("append");
    }
    let all = s.audit(&ev(), 10).await.expect("audit");
    let actions: Vec<&str> = all.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["set_admit_rate", "pause", "resume"]);
    assert_eq!(
        (all[2].old.clone(), all[2].new.clone()),
        (json!(2), json!({"v": 3}))
    );
    let last = s.audit(&ev(), 1).await.expect("audit");
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].action, "resume");
    let nope = waiting_room::domain::EventId::parse("nope").expect("id");
    assert!(s.audit(&nope, 10).await.is_err());
}

/// The sale report's samples (`report` module): kept in order, whole, per event; an unknown
/// event is an error, not an empty report.
pub async fn report_samples_keep_their_order(s: Store) {
    create(&s, 10).await;
    assert!(s.report_samples(&ev()).await.expect("samples").is_empty());
    let f = s
        .figures(&ev(), NOW, SILENCE)
        .await
        .expect("figures")
        .expect("event");
    let booking = waiting_room::domain::BookingSample {
        bounds_ms: vec![Some(100), None],
        hold_counts: vec![3, 4],
        requests: 9,
        server_errors: 1,
        sold: 2,
        held: 1,
        free: 7,
        bookings: 1,
        ended: sale_common::load::HoldEnds {
            expired: 3,
            released: 1,
            failed: 1,
        },
    };
    for i in 0..3 {
        let b = (i == 2).then(|| booking.clone());
        let sample = waiting_room::report::sample(&f, NOW + i * 10_000, b);
        s.report_append(&ev(), &sample).await.expect("append");
    }
    let all = s.report_samples(&ev()).await.expect("samples");
    let at: Vec<i64> = all.iter().map(|x| x.at_ms - NOW).collect();
    assert_eq!(at, [0, 10_000, 20_000]);
    assert_eq!(all[2].booking.as_ref(), Some(&booking));
    assert_eq!(all[0].admit_rate, f.meta.admit_rate);
    let nope = waiting_room::domain::EventId::parse("nope").expect("id");
    assert!(s.report_samples(&nope).await.is_err());
}
