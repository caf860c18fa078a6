//! Heartbeat load at the default intervals, measured: 100 000 fans wait, those inside the ready
//! window heartbeat every 10 s as the protocol says (each at its own phase), the admitter runs
//! at 50/s for two minutes of `ManualClock` time. Heartbeats per second stay at
//! `ready_window / heartbeat_interval` (3 000 / 10 s = 300/s), independent of the queue's length,
//! and no live fan is skipped.

use sale_common::{Clock, ManualClock};
use std::sync::Arc;
use waiting_room::admitter::{open_event, Admitter, LivenessRules};
use waiting_room::domain::{EventId, EventMeta, EventState, Place, VisitorId};
use waiting_room::store::{memory::MemoryStore, QueueStore};

const T0: i64 = 1_764_500_000;

#[tokio::test]
async fn heartbeats_per_second_depend_on_the_window_not_the_queue() {
    let s: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let ev = EventId::parse("big").expect("id");
    let meta = EventMeta {
        id: ev.clone(),
        state: EventState::Prequeue,
        opens_at: T0,
        admit_rate: 50.0,
        max_active: 1_000_000,
        admission_ttl_secs: 600,
        booking_url: String::new(),
        pow_bits: 0,
        stock_wait: 0,
        time_zone: "UTC".into(),
    };
    s.create_event(&meta).await.expect("create");
    open_event(s.as_ref(), &ev).await.expect("open");
    let clock = ManualClock::new(T0 * 1000);
    let fans: Vec<VisitorId> = (0..100_000).map(|_| VisitorId::random()).collect();
    for f in &fans {
        s.join(&ev, f, clock.now_ms(), 120_000).await.expect("join");
    }
    let rules = LivenessRules::default();
    let mut adm = Admitter::new(s.clone(), ev.clone(), 100, 60).with_rules(rules);
    let (interval_s, seconds) = (10u64, 120u64);
    let mut beats = 0u64;
    for t in 0..seconds {
        for _ in 0..10 {
            clock.advance_ms(100);
            adm.step(clock.now_ms()).await.expect("step");
        }
        let f = s
            .figures(&ev, clock.now_ms(), rules.silence_ms)
            .await
            .expect("f")
            .expect("ev");
        // A fan heartbeats while `number − cursor <= ready_window`, every 10 s at its phase.
        let first = f.cursor + 1;
        let last = (f.cursor + f.ready_window).min(fans.len() as u64);
        for n in first..=last {
            if (n + t) % interval_s == 0 {
                let h = s
                    .heartbeat(&ev, &fans[n as usize - 1], clock.now_ms(), 120_000)
                    .await
                    .expect("hb");
                assert!(
                    matches!(h.place, Place::Ready | Place::YourTurn),
                    "{n}: {:?}",
                    h.place
                );
                beats += 1;
            }
        }
    }
    let f = s
        .figures(&ev, clock.now_ms(), rules.silence_ms)
        .await
        .expect("f")
        .expect("ev");
    let per_sec = beats as f64 / seconds as f64;
    eprintln!(
        "100000 waiting, window {}, heartbeat every {interval_s}s: {per_sec:.0} heartbeats/s; cursor {}, skipped {}",
        f.ready_window, f.cursor, f.skipped_total
    );
    assert_eq!(f.ready_window, 3000, "max(100, 50/s × 60 s)");
    assert!((290.0..=310.0).contains(&per_sec), "{per_sec}/s");
    assert_eq!(f.skipped_total, 0, "no live fan is skipped");
    assert!(
        (5990..=6000).contains(&f.cursor),
        "50/s for 120 s: {}",
        f.cursor
    );
    assert_eq!(
        f.queue_length(),
        100_000 - f.cursor,
        "everyone waiting is live"
    );
}
