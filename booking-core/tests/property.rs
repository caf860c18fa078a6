//! Property test (issue 5): long random sequences of hold (seats and pool), cancel, expire
//! (the ManualClock jumps), pay and release (reconciler steps) against a small venue — 6 seats
//! and a 4-place pool — through the real HTTP API and gateway simulator. After every step:
//! available = capacity − live holds − bookings (seats and pool), never negative; no seat in two
//! live holds; the pool counter does not drift. 32 cases × up to 40 steps on SQLite, 6 × 25 on
//! PostgreSQL (CI stays fast).

mod support;

use booking_core::{PoolSpec, Reconciler};
use proptest::prelude::*;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, SHOW};

const SEATS: u32 = 6;
const POOL: u32 = 4;
const FANS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    Hold { fan: usize, seats: Vec<u32> },
    Pool { fan: usize, qty: u32 },
    Cancel { fan: usize },
    Pay { fan: usize },
    Expire { secs: u32 },
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..FANS, proptest::collection::btree_set(1..=SEATS, 1..=3))
            .prop_map(|(fan, s)| Op::Hold { fan, seats: s.into_iter().collect() }),
        2 => (0..FANS, 1..=3u32).prop_map(|(fan, qty)| Op::Pool { fan, qty }),
        1 => (0..FANS).prop_map(|fan| Op::Cancel { fan }),
        2 => (0..FANS).prop_map(|fan| Op::Pay { fan }),
        1 => (1..600u32).prop_map(|secs| Op::Expire { secs }),
        1 => Just(Op::Release),
    ]
}

struct Run {
    h: Harness,
    rec: Reconciler,
    /// The fan's latest hold id (one admission per fan).
    holds: Vec<Option<String>>,
}

impl Run {
    async fn apply(&mut self, op: &Op) {
        let h = &self.h;
        match op {
            Op::Hold { fan, seats } => {
                let ids: Vec<String> = seats.iter().map(|n| format!("A-1-{n}")).collect();
                let body = json!({ "seats": ids });
                self.record(*fan, body).await;
            }
            Op::Pool { fan, qty } => {
                self.record(*fan, json!({"pool": "GA", "quantity": qty}))
                    .await
            }
            Op::Cancel { fan } => {
                if let Some(hold) = &self.holds[*fan] {
                    let r = h
                        .http
                        .delete(format!("{}/api/holds/{hold}", h.base))
                        .bearer_auth(h.token(&format!("fan{fan}")))
                        .send()
                        .await
                        .unwrap();
                    assert!(
                        [200, 409, 503].contains(&r.status().as_u16()),
                        "{}",
                        r.status()
                    );
                }
            }
            Op::Pay { fan } => {
                if let Some(hold) = self.holds[*fan].clone() {
                    let t = h.token(&format!("fan{fan}"));
                    let r = h
                        .http
                        .post(format!("{}/api/holds/{hold}/pay", h.base))
                        .bearer_auth(&t)
                        .send()
                        .await
                        .unwrap();
                    if r.status() == 200 {
                        let p: Value = r.json().await.unwrap();
                        let url = p["checkout_url"].as_str().unwrap();
                        let back = h.http.post(format!("{url}/pay")).send().await.unwrap();
                        if let Some(loc) = back.headers().get("location") {
                            let loc = loc.to_str().unwrap().to_owned();
                            h.http.get(loc).send().await.unwrap();
                        }
                    }
                }
            }
            Op::Expire { secs } => h.clock.advance_ms(i64::from(*secs) * 1000),
            Op::Release => {
                self.rec.step(h.clock.now_ms()).await.unwrap();
            }
        }
    }

    async fn record(&mut self, fan: usize, body: Value) {
        let key = uuid::Uuid::new_v4().to_string();
        let (st, b) = self
            .h
            .hold_with(&self.h.token(&format!("fan{fan}")), &key, body, &[])
            .await;
        assert!([201, 409].contains(&st), "{st} {b}");
        if st == 201 {
            self.holds[fan] = b["hold_id"].as_str().map(str::to_owned);
        }
    }

    /// The invariants, read at the harness clock.
    async fn check(&self, step: usize, op: &Op) {
        let (h, now) = (&self.h, self.h.clock.now_ms());
        let map: Value = h
            .http
            .get(format!("{}/api/shows/{SHOW}/seats", h.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let live = "(h.status = 'PAID' OR (h.status = 'HELD' AND h.expires_at > $1))";
        let q = |sql: String| {
            let db = h.state.db.clone();
            async move {
                sqlx::query_scalar::<_, i64>(&sql)
                    .bind(now)
                    .fetch_one(&db)
                    .await
                    .unwrap()
            }
        };
        let twice = q(format!("SELECT COUNT(*) FROM (SELECT hs.seat_id FROM hold_seats hs JOIN holds h ON h.id = hs.hold_id WHERE {live} GROUP BY hs.seat_id HAVING COUNT(*) > 1) t")).await;
        assert_eq!(twice, 0, "step {step} {op:?}: a seat in two live holds");
        let seats_live = q(format!(
            "SELECT COUNT(*) FROM hold_seats hs JOIN holds h ON h.id = hs.hold_id WHERE {live}"
        ))
        .await;
        let available = map["available"].as_i64().unwrap();
        assert_eq!(
            available,
            i64::from(SEATS) - seats_live,
            "step {step} {op:?}: seats"
        );
        let units = q(format!("SELECT CAST(COALESCE(SUM(hp.quantity), 0) AS BIGINT) FROM hold_pools hp JOIN holds h ON h.id = hp.hold_id WHERE {live} AND (h.status = 'PAID' OR hp.counted = 1)")).await;
        let pool = map["pools"][0]["available"].as_i64().unwrap();
        assert!(pool >= 0, "step {step}: negative pool availability");
        assert_eq!(pool, i64::from(POOL) - units, "step {step} {op:?}: pool");
        // `taken` net of the returns not folded yet (`pools::TAKEN`).
        let drift = q(format!("SELECT CAST({} - COALESCE((SELECT SUM(hp.quantity) FROM hold_pools hp JOIN holds h ON h.id = hp.hold_id WHERE hp.counted = 1 AND h.status IN ('HELD', 'PAID')), 0) AS BIGINT) FROM pools p WHERE $1 = $1", booking_core::inventory::pools::TAKEN)).await;
        assert_eq!(drift, 0, "step {step} {op:?}: pool counter drift");
    }
}

async fn run(b: Backend, ops: Vec<Op>) {
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, SEATS);
        c.shows[0].venue.pools.push(PoolSpec {
            id: "GA".into(),
            price_cents: 2_000,
            capacity: POOL,
        });
        c.hold_rate_per_min = 0;
    })
    .await;
    let rec = Reconciler::new(h.state.clone());
    let mut r = Run {
        h,
        rec,
        holds: vec![None; FANS],
    };
    for (i, op) in ops.iter().enumerate() {
        r.apply(op).await;
        r.check(i, op).await;
    }
}

fn cases(b: Backend, n: u32, steps: usize) {
    let cfg = ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(cfg, |(ops in proptest::collection::vec(op(), 1..steps))| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(b, ops));
    });
}

#[test]
fn availability_invariants_hold_over_random_sequences_sqlite() {
    cases(Backend::Sqlite, 32, 40);
}

#[test]
fn availability_invariants_hold_over_random_sequences_postgres() {
    cases(Backend::Postgres, 6, 25);
}
