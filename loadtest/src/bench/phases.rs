//! The bench phases, in order: ceiling (`/healthz`), status document, join (keeps the join
//! tokens), heartbeat (on those tokens), admission claim (each join token claimed once, after the
//! admit rate is raised so the cursor has passed them all), door check (`GET /api/me` with the
//! admission tokens), holds on one hot show (each hold a fresh admission token, minted untimed
//! before the phase, [`Admissions`]; a 201 is released before that worker's next hold, outside
//! the timed request), pool holds (places kept).

use super::admissions::Admissions;
use super::gen::{closed_loop, timed, Measured, Sample, Workload};
use super::BenchArgs;
use rand::seq::SliceRandom;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every phase needs.
#[derive(Debug, Clone)]
pub struct Ctx {
    client: reqwest::Client,
    wr: String,
    bc: String,
    admin: String,
    event: String,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    hot_seats: usize,
    seats_per_hold: usize,
    database: Option<String>,
}

type Phase = (Measured, String);

impl Ctx {
    /// One client for every phase (connection pool as large as the worker count).
    pub fn new(
        stack: &ticket_sale::stack::Stack,
        args: &BenchArgs,
        warmup: Duration,
        duration: Duration,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(args.connections * 2)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            client,
            wr: stack.waiting_room_url.clone(),
            bc: stack.booking_url.clone(),
            admin: stack.admin_token.clone(),
            event: "bench".into(),
            connections: args.connections,
            warmup,
            duration,
            hot_seats: args.hot_seats.max(1),
            seats_per_hold: args.seats_per_hold.clamp(1, 4),
            database: args.database.clone(),
        })
    }

    /// The shared HTTP client.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Booking core base URL.
    pub fn booking(&self) -> &str {
        &self.bc
    }

    /// Waiting room base URL.
    pub fn waiting_room(&self) -> &str {
        &self.wr
    }

    /// Concurrent workers (connections) of every phase.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// Waits until the event's cursor has reached its last queue number (every joined visitor
    /// admitted), polling the admin API every 100 ms; errors after `limit`.
    pub async fn wait_cursor(&self, limit: Duration) -> anyhow::Result<()> {
        let path = format!("/admin/events/{}", self.event);
        let t = Instant::now();
        loop {
            let f = self.admin_json(reqwest::Method::GET, &path, None).await;
            let (cursor, last) = (f["cursor"].as_u64(), f["last_number"].as_u64());
            if cursor.is_some() && cursor >= last {
                return Ok(());
            }
            anyhow::ensure!(
                t.elapsed() < limit,
                "cursor did not reach the last number within {limit:?}: {f}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The bench show (= event) id.
    pub fn show(&self) -> &str {
        &self.event
    }

    /// Admin bearer token (shared by both services).
    pub fn admin_token(&self) -> &str {
        &self.admin
    }

    async fn run(&self, name: &str, ok: &[u16], work: Workload) -> Measured {
        let m = closed_loop(name, self.connections, self.warmup, self.duration, ok, work).await;
        self.print(&m);
        m
    }

    fn print(&self, m: &Measured) {
        println!(
            "  {:<10} {:>9.0} req/s  p50 {:.2} ms  p99 {:.2} ms  ({} ok, {} other 4xx, {} errors)",
            m.name, m.rps, m.p50_ms, m.p99_ms, m.ok, m.other_4xx, m.errors
        );
    }

    async fn admin_json(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.wr))
            .bearer_auth(&self.admin);
        if let Some(b) = body {
            req = req.json(&b);
        }
        match req.send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }
}

/// Runs every phase; the measured figures (ceiling first) and the notes of skipped figures.
pub async fn all(ctx: &Ctx) -> anyhow::Result<(Vec<Phase>, Vec<String>)> {
    wait_open(ctx).await?;
    let mut out = Vec::new();
    let c = ctx.client.clone();
    let url = format!("{}/healthz", ctx.wr);
    let work: Workload = Arc::new(move |_, _| Box::pin(timed_status(c.get(&url))));
    out.push((
        ctx.run("healthz", &[200], work).await,
        "waiting room GET /healthz (no store call): the ceiling".into(),
    ));
    let c = ctx.client.clone();
    let url = format!("{}/status/{}.json", ctx.wr, ctx.event);
    let work: Workload = Arc::new(move |_, _| Box::pin(timed_status(c.get(&url))));
    out.push((
        ctx.run("status", &[200], work).await,
        "GET /status/{event}.json (in-memory snapshot)".into(),
    ));
    let (m, join_tokens) = join(ctx).await;
    out.push((
        m,
        "POST /api/events/{event}/join, a new visitor each time".into(),
    ));
    anyhow::ensure!(!join_tokens.is_empty(), "no join succeeded");
    let tokens = Arc::new(join_tokens);
    let (c, t) = (ctx.client.clone(), tokens.clone());
    let url = format!("{}/api/events/{}/heartbeat", ctx.wr, ctx.event);
    let work: Workload = Arc::new(move |w, i| {
        let tok = &t[(w * 7919 + i as usize) % t.len()];
        Box::pin(timed_status(c.post(&url).bearer_auth(tok)))
    });
    out.push((
        ctx.run("heartbeat", &[200], work).await,
        format!(
            "POST …/heartbeat, round-robin over {} join tokens",
            tokens.len()
        ),
    ));
    let claimed = claim(ctx, tokens).await?;
    out.push((claimed.measured, claimed.note));
    anyhow::ensure!(!claimed.admissions.is_empty(), "no admission claimed");
    let adm = Arc::new(claimed.admissions);
    let (c, a) = (ctx.client.clone(), adm.clone());
    let url = format!("{}/api/me", ctx.bc);
    let work: Workload = Arc::new(move |w, i| {
        let tok = &a[(w * 7919 + i as usize) % a.len()];
        Box::pin(timed_status(c.get(&url).bearer_auth(tok)))
    });
    let door = ctx.run("door", &[200], work).await;
    let door_rps = door.rps;
    out.push((
        door,
        format!(
            "booking core GET /api/me with Bearer admission token ({} tokens)",
            adm.len()
        ),
    ));
    // Issue 13: the door with a cached token against the booking core's own ceiling, measured
    // in alternating slices (A B B A: the machine's drift weighs on both alike): each worker
    // sends one admission token again and again, so after its first request the
    // verified-token cache answers (no EdDSA check).
    let c = ctx.client.clone();
    let url = format!("{}/healthz", ctx.bc);
    let ceiling: Workload = Arc::new(move |_, _| Box::pin(timed_status(c.get(&url))));
    let (c, a) = (ctx.client.clone(), adm.clone());
    let url = format!("{}/api/me", ctx.bc);
    let door: Workload = Arc::new(move |w, _| {
        let tok = &a[w % a.len()];
        Box::pin(timed_status(c.get(&url).bearer_auth(tok)))
    });
    let (healthz, cached) = super::gen::interleaved(
        ctx.connections,
        ctx.warmup,
        ctx.duration,
        ("bc-healthz", &[200], ceiling),
        ("door-cached", &[200], door),
    )
    .await;
    for m in [&healthz, &cached] {
        ctx.print(m);
    }
    let slices = "measured with door-cached in alternating half slices, A B B A";
    out.push((
        healthz,
        format!(
            "booking core GET /healthz (no database call): the booking core's ceiling; {slices}"
        ),
    ));
    out.push((
        cached,
        format!(
            "booking core GET /api/me, each of the {} workers with one admission token \
             (verified-token cache hits after its first request); {slices}",
            ctx.connections
        ),
    ));
    // On a SQLite file the service runs its plain holds on its writer thread, queued or not.
    let sqlite = !ctx
        .database
        .as_deref()
        .is_some_and(|u| u.starts_with("postgres"));
    // Each hold takes an admission no request used before (see `admissions`); before a phase,
    // enough are minted for 1.5 times the fastest hold rate seen so far, at first a third of
    // the door's rate with uncached tokens (a hold's door check is that, and its statements
    // come on top: every hold phase measured so far ran at a quarter of it or less). A phase
    // that outruns the estimate reuses tokens and its note says how many.
    let spend = Arc::new(super::admissions::Admissions::new(
        adm.to_vec(),
        claimed.unclaimed,
    ));
    let mut rate = door_rps / 3.0;
    let window = (ctx.warmup + ctx.duration).as_secs_f64();
    let need = |rate: f64| (1.5 * rate * window) as usize + ctx.connections;
    for (name, queued) in [("hold", false), ("hold-queue", true)] {
        super::hotq::switch(ctx, queued).await?;
        spend.top_up(ctx, need(rate)).await?;
        let waits = super::hotq::sample(ctx.database.as_deref()).await;
        let (m, note) = holds(ctx, spend.clone(), name, usize::from(queued)).await?;
        rate = rate.max(m.rps);
        super::hotq::stop(&waits);
        let how = match (queued, sqlite) {
            (true, false) => "per-show hold queue ON (one worker, a batch per transaction)",
            (false, false) => "per-show hold queue off (concurrent transactions)",
            (true, true) => {
                "per-show hold queue ON: on SQLite the writer thread is the queue, the same \
                 path as with it off (db::writer)"
            }
            (false, true) => {
                "per-show hold queue off: SQLite's writer thread (every hold waiting in one \
                 transaction, db::writer)"
            }
        };
        out.push((m, format!("{note}; {how}; {}", waits.describe())));
    }
    for (name, queued) in [("pool-hold", false), ("pool-queue", true)] {
        super::hotq::switch(ctx, queued).await?;
        spend.top_up(ctx, need(rate)).await?;
        let waits = super::hotq::sample(ctx.database.as_deref()).await;
        let (m, note) = pool_holds(ctx, spend.clone(), name).await?;
        rate = rate.max(m.rps);
        super::hotq::stop(&waits);
        let how = match (queued, sqlite) {
            (true, false) => "per-show hold queue ON",
            (false, false) => {
                "per-show hold queue off (a pool-only hold takes the show's queue anyway, \
                 booking-core HoldQueues::routes: the same path as with it on)"
            }
            (true, true) => "per-show hold queue ON (on SQLite: the writer thread, as off)",
            (false, true) => "per-show hold queue off (SQLite's writer thread)",
        };
        out.push((m, format!("{note}; {how}; {}", waits.describe())));
    }
    super::hotq::switch(ctx, false).await?;
    Ok((out, Vec::new()))
}

async fn timed_status(req: reqwest::RequestBuilder) -> Sample {
    timed(req).await.0
}

async fn wait_open(ctx: &Ctx) -> anyhow::Result<()> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(15) {
        let doc = ctx
            .admin_json(
                reqwest::Method::GET,
                &format!("/admin/events/{}", ctx.event),
                None,
            )
            .await;
        if doc["state"] == "open" {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("event {} did not open within 15 s", ctx.event)
}

async fn join(ctx: &Ctx) -> (Measured, Vec<String>) {
    let sink = Arc::new(Mutex::new(Vec::<String>::new()));
    let (c, s) = (ctx.client.clone(), sink.clone());
    let url = format!("{}/api/events/{}/join", ctx.wr, ctx.event);
    let work: Workload = Arc::new(move |_, _| {
        let (req, s) = (c.post(&url), s.clone());
        Box::pin(async move {
            let (sample, body) = timed(req).await;
            if let Some(tok) = body.and_then(|b| b.json()["join_token"].as_str().map(String::from))
            {
                s.lock().expect("tokens").push(tok);
            }
            sample
        })
    });
    let m = ctx.run("join", &[200], work).await;
    let tokens = std::mem::take(&mut *sink.lock().expect("tokens"));
    (m, tokens)
}

/// What the claim phase leaves: its figure and note, the admission tokens it minted and the join
/// tokens it did not reach (admitted, unclaimed: the hold phases' top-up claims them).
struct Claimed {
    measured: Measured,
    note: String,
    admissions: Vec<String>,
    unclaimed: Vec<String>,
}

/// Raises the admit rate so the cursor passes every joined fan, then claims each join token once
/// (wrapping around to repeat claims only if the tokens run out).
async fn claim(ctx: &Ctx, tokens: Arc<Vec<String>>) -> anyhow::Result<Claimed> {
    let path = format!("/admin/events/{}", ctx.event);
    ctx.admin_json(
        reqwest::Method::PATCH,
        &path,
        Some(serde_json::json!({"admit_rate": 1_000_000.0})),
    )
    .await;
    ctx.wait_cursor(Duration::from_secs(120)).await?;
    let sink = Arc::new(Mutex::new(Vec::<String>::new()));
    let next = Arc::new(AtomicUsize::new(0));
    let (c, s, n, t) = (
        ctx.client.clone(),
        sink.clone(),
        next.clone(),
        tokens.clone(),
    );
    let url = format!("{}/api/events/{}/admission", ctx.wr, ctx.event);
    let work: Workload = Arc::new(move |_, _| {
        let i = n.fetch_add(1, Ordering::Relaxed);
        let req = c.post(&url).bearer_auth(&t[i % t.len()]);
        let (s, fresh) = (s.clone(), i < t.len());
        Box::pin(async move {
            let (sample, body) = timed(req).await;
            if let Some(tok) =
                body.and_then(|b| b.json()["admission_token"].as_str().map(String::from))
            {
                if fresh {
                    s.lock().expect("admissions").push(tok);
                }
            }
            sample
        })
    });
    let m = ctx.run("claim", &[200], work).await;
    let sent = next.load(Ordering::Relaxed);
    let fresh = sent.min(tokens.len());
    let note = format!(
        "POST …/admission: {fresh} first claims (new EdDSA token + store write), {} repeat claims",
        sent.saturating_sub(tokens.len())
    );
    let admissions = std::mem::take(&mut *sink.lock().expect("admissions"));
    Ok(Claimed {
        measured: m,
        note,
        admissions,
        unclaimed: tokens.get(fresh..).unwrap_or_default().to_vec(),
    })
}

/// Refusals of a hold phase by problem `type` (status and kind), for the note.
#[derive(Debug, Default)]
struct Refusals(Mutex<std::collections::BTreeMap<String, u64>>);

impl Refusals {
    fn count(&self, status: u16, body: Option<&super::gen::bytes_body::Body>) {
        if status == 201 {
            return;
        }
        let kind = body
            .and_then(|b| b.json()["type"].as_str().map(String::from))
            .unwrap_or_default();
        *self
            .0
            .lock()
            .expect("refusals")
            .entry(format!("{status} {kind}"))
            .or_default() += 1;
    }

    fn describe(&self) -> String {
        let m = self.0.lock().expect("refusals");
        if m.is_empty() {
            return "no refusals".into();
        }
        let parts: Vec<String> = m.iter().map(|(k, n)| format!("{k} × {n}")).collect();
        format!("refusals: {}", parts.join(", "))
    }
}

/// What one hold request asks for (a JSON body), drawn per request.
type Ask = Arc<dyn Fn() -> Value + Send + Sync>;

/// A worker's live hold, released before its next.
#[derive(Debug)]
struct Live {
    hold: String,
    token: String,
    seats: Vec<String>,
    /// When its 201 arrived.
    got: Instant,
}

/// The seats the bench held, each as spans from a 201's arrival to the sending of its release
/// (or the phase's end, for a hold kept). A span lies inside the time the seat was really held
/// (the hold committed before its 201 was sent; the release commits after it was sent), so two
/// spans of one seat that overlap are a seat held twice: a check that can fail, though a double
/// booking shorter than the client's view could still pass it.
#[derive(Debug, Default)]
struct Spans(Mutex<Vec<(String, Instant, Instant)>>);

impl Spans {
    fn add(&self, seats: &[String], from: Instant, to: Instant) {
        let mut v = self.0.lock().expect("spans");
        v.extend(seats.iter().map(|s| (s.clone(), from, to)));
    }

    /// `(seats held twice, spans compared)`.
    fn held_twice(&self) -> (usize, usize) {
        let mut v = std::mem::take(&mut *self.0.lock().expect("spans"));
        v.sort();
        let mut twice = std::collections::BTreeSet::new();
        for pair in v.windows(2) {
            // Sorted by seat, then start: a seat has two spans that overlap exactly when two
            // neighbours do (a span overlapping a later one overlaps the next one too).
            if pair[0].0 == pair[1].0 && pair[1].1 < pair[0].2 {
                twice.insert(pair[0].0.clone());
            }
        }
        (twice.len(), v.len())
    }
}

/// Whether a hold phase gives its places back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The worker releases its previous 201 (untimed) before its next hold: a 100-seat hot
    /// block would otherwise be sold out after 50 holds.
    BeforeNext,
    /// The places stay held (until their deadline, after the phase): a 1,000,000-place pool
    /// does not run out in a phase, and each request is one hold, as the figure says.
    Never,
}

/// The closed loop both hold phases share: each request takes the next unused admission token
/// of `adm` (a released hold ends its admission's booking rights: `409 admission-ended`; a kept
/// one is the admission's live hold: `409 hold-exists`), asks for `ask()`, and with
/// [`Release::BeforeNext`] the worker releases its previous 201 (untimed) before its next hold.
/// Returns the figure (a seat the bench saw held twice, [`Spans`], counts as an error) and a
/// note: the refusals by kind, the tokens reused and the overlap check.
async fn hold_loop(
    ctx: &Ctx,
    adm: Arc<Admissions>,
    name: &str,
    ask: Ask,
    release: Release,
) -> (Measured, String) {
    let live: Arc<Vec<Mutex<Option<Live>>>> =
        Arc::new((0..ctx.connections).map(|_| Mutex::new(None)).collect());
    let (c, bc, ev) = (ctx.client.clone(), ctx.bc.clone(), ctx.event.clone());
    let refusals = Arc::new(Refusals::default());
    let tally = refusals.clone();
    let spans = Arc::new(Spans::default());
    let seen = spans.clone();
    let kept = live.clone();
    let reused_before = adm.reused();
    let spend = adm.clone();
    let work: Workload = Arc::new(move |w, _| {
        let (c, bc, ev, live, tally, seen) = (
            c.clone(),
            bc.clone(),
            ev.clone(),
            live.clone(),
            tally.clone(),
            seen.clone(),
        );
        let tok = spend.take().unwrap_or_default();
        let body = ask();
        Box::pin(async move {
            let prev = live[w].lock().expect("hold slot").take();
            if let Some(l) = prev {
                seen.add(&l.seats, l.got, Instant::now());
                let _ = c
                    .delete(format!("{bc}/api/holds/{}", l.hold))
                    .bearer_auth(&l.token)
                    .send()
                    .await;
            }
            let req = c
                .post(format!("{bc}/api/shows/{ev}/holds"))
                .bearer_auth(&tok)
                .header(
                    "Idempotency-Key",
                    format!("{:032x}", rand::random::<u128>()),
                )
                .json(&body);
            let (sample, body) = timed(req).await;
            tally.count(sample.status, body.as_ref());
            if sample.status == 201 {
                let got = Instant::now();
                let json = body.map(|b| b.json()).unwrap_or_default();
                let seats: Vec<String> = json["seats"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                match (release, json["hold_id"].as_str()) {
                    (Release::BeforeNext, Some(h)) => {
                        *live[w].lock().expect("hold slot") = Some(Live {
                            hold: h.to_owned(),
                            token: tok,
                            seats,
                            got,
                        });
                    }
                    // Kept to the end of the run (a pool hold has no seats).
                    _ => seen.add(&seats, got, got + Duration::from_secs(3600)),
                }
            }
            sample
        })
    });
    let mut m = ctx.run(name, &[201], work).await;
    // The holds still live stay held past the phase.
    let end = Instant::now() + Duration::from_secs(3600);
    for slot in kept.iter() {
        if let Some(l) = slot.lock().expect("hold slot").take() {
            spans.add(&l.seats, l.got, end);
        }
    }
    let (twice, compared) = spans.held_twice();
    m.errors += twice as u64;
    let mut note = refusals.describe();
    let reused = adm.reused() - reused_before;
    note.push_str(&format!(
        "; admission tokens used twice: {reused} (minted untimed before the phase)"
    ));
    if compared > 0 {
        note.push_str(&format!(
            "; seats held twice: {twice} (the spans from each 201 to its release's sending, \
             {compared} seat spans, compared per seat)"
        ));
    }
    (m, note)
}

/// Holds on one hot show: every request asks for `seats_per_hold` random seats of the first
/// `hot_seats` seats of the map ([`hold_loop`]). Run `round` uses the `round`-th block.
async fn holds(ctx: &Ctx, adm: Arc<Admissions>, name: &str, round: usize) -> anyhow::Result<Phase> {
    let hot = crate::picks::hot_block(
        &ctx.client,
        &ctx.bc,
        &ctx.event,
        round * ctx.hot_seats,
        ctx.hot_seats,
    )
    .await?;
    anyhow::ensure!(hot.len() >= ctx.seats_per_hold, "seat map too small");
    let fans = ctx.connections;
    let k = ctx.seats_per_hold;
    let ask: Ask = Arc::new(move || {
        let seats: Vec<&String> = hot.choose_multiple(&mut rand::thread_rng(), k).collect();
        serde_json::json!({ "seats": seats })
    });
    let (m, refused) = hold_loop(ctx, adm, name, ask, Release::BeforeNext).await;
    let note = format!(
        "POST /api/shows/{{show}}/holds, {k} random seats of a {}-seat hot block, {fans} \
         concurrent fans (a fresh admission token per hold); 201 = held ({:.0}/s), 409 = taken \
         ({:.0}/s); each 201 is released (untimed) before that fan's next hold; {refused}",
        ctx.hot_seats,
        m.ok_rps,
        m.other_4xx as f64 / m.secs
    );
    Ok((m, note))
}

/// Pool holds on the hot show: every request asks for 1 place of the `FLOOR` pool (one counter
/// row, the hottest row there is), through [`hold_loop`]; the places stay held
/// ([`Release::Never`]: a phase takes far fewer than the pool's 1,000,000 places, and each
/// request is one hold).
async fn pool_holds(ctx: &Ctx, adm: Arc<Admissions>, name: &str) -> anyhow::Result<Phase> {
    let fans = ctx.connections;
    let ask: Ask = Arc::new(|| serde_json::json!({ "pool": "FLOOR", "quantity": 1 }));
    let (mut m, refused) = hold_loop(ctx, adm, name, ask, Release::Never).await;
    // The pool's counter against its counted holds (booking core's drift check): a pool
    // that drifted sold a place twice or lost one; it counts as an error, as does no answer.
    let drift = ctx
        .client
        .get(format!("{}/admin/shows/{}/pools/drift", ctx.bc, ctx.event))
        .bearer_auth(&ctx.admin)
        .send()
        .await;
    let drifting = match drift {
        Ok(r) => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|d| d["drifting"].as_u64()),
        Err(_) => None,
    };
    m.errors += drifting.unwrap_or(1);
    let refused = match drifting {
        Some(n) => format!("{refused}; pools drifting after the phase: {n}"),
        None => format!("{refused}; pool drift not read (counted as an error)"),
    };
    let note = format!(
        "POST /api/shows/{{show}}/holds {{\"pool\":\"FLOOR\",\"quantity\":1}} on one \
         1,000,000-place pool, {fans} concurrent fans (a fresh admission token per hold); the \
         places stay held (no release: each request is one hold); {refused}"
    );
    Ok((m, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two spans of one seat that overlap are a seat held twice; spans that follow each other,
    /// or overlap on other seats, are not.
    #[test]
    fn overlapping_spans_of_one_seat_are_a_seat_held_twice() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let seats = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let spans = Spans::default();
        spans.add(&seats(&["A-1-1", "A-1-2"]), at(0), at(10));
        spans.add(&seats(&["A-1-1"]), at(10), at(20));
        spans.add(&seats(&["A-1-3"]), at(5), at(15));
        assert_eq!(spans.held_twice(), (0, 4));
        let spans = Spans::default();
        spans.add(&seats(&["A-1-1", "A-1-2"]), at(0), at(10));
        spans.add(&seats(&["A-1-1"]), at(10), at(20));
        spans.add(&seats(&["A-1-1"]), at(19), at(25));
        spans.add(&seats(&["A-1-2", "A-1-3"]), at(9), at(12));
        assert_eq!(spans.held_twice(), (2, 6));
    }
}
