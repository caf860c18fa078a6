//! The stock rule seen from outside (issue "closed loop and report": "the inventory rule shown
//! in a rush on a small show"). With `rush --stock-rule` a poller reads the booking core's
//! `/internal/load` (admin token) every 100 ms and keeps the show's stock; the check finds the
//! windows where nothing could be held while seats sat in live holds that may come back, and
//! counts the fans whose turn came entirely inside one of them, after the rule's reaction time
//! (the closed loop's interval, two admitter ticks, one poll and one status publish, since a fan
//! sees its turn through a document up to one publish old): the waiting room let them
//! in to an empty map. It must be none.

use crate::model::{Check, FanOutcome};
use std::time::{Duration, Instant};

/// One read: ms since the run started, places free, places in live holds.
pub type Read = (u64, i64, i64);

/// The poller; [`Poller::finish`] stops it and returns its reads.
pub struct Poller {
    task: tokio::task::JoinHandle<Vec<Read>>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Poller {
    /// Reads `{booking}/internal/load` every `every` until finished (unreadable reads are
    /// skipped: a gap, never a guess).
    pub fn spawn(
        client: reqwest::Client,
        booking: &str,
        show: &str,
        admin_token: &str,
        every: Duration,
        started: Instant,
    ) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (url, show, token) = (
            format!("{}/internal/load", booking.trim_end_matches('/')),
            show.to_owned(),
            admin_token.to_owned(),
        );
        let task = tokio::spawn(async move {
            let mut reads = Vec::new();
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                let Ok(r) = client.get(&url).bearer_auth(&token).send().await else {
                    continue;
                };
                let Ok(doc) = r.json::<sale_common::load::LoadDoc>().await else {
                    continue;
                };
                if let Some(s) = doc.shows.iter().find(|s| s.show == show) {
                    reads.push((started.elapsed().as_millis() as u64, s.free, s.held));
                }
            }
            reads
        });
        Self { task, stop }
    }

    /// Stops the poller; its reads, oldest first.
    pub async fn finish(self) -> Vec<Read> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Windows `[from, to]` (ms) over which every read saw nothing free and something held.
pub fn empty_map_windows(reads: &[Read]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut open: Option<(u64, u64)> = None;
    for &(t, free, held) in reads {
        if free <= 0 && held > 0 {
            open = Some(open.map_or((t, t), |(from, _)| (from, t)));
        } else if let Some(w) = open.take() {
            out.push(w);
        }
    }
    out.extend(open);
    out
}

/// The check: no fan's turn came inside an empty-map window, `reaction_ms` after its start.
pub fn check(fans: &[FanOutcome], reads: &[Read], reaction_ms: u64) -> Check {
    let windows = empty_map_windows(reads);
    let inside = |lo: u64, hi: u64, from: u64| {
        windows
            .iter()
            .any(|&(start, end)| lo >= start + from && hi <= end)
    };
    let turns: Vec<(u64, u64)> = fans.iter().filter_map(|f| f.turn_window_ms).collect();
    let late = turns
        .iter()
        .filter(|&&(lo, hi)| inside(lo, hi, reaction_ms))
        .count();
    let early = turns.iter().filter(|&&(lo, hi)| inside(lo, hi, 0)).count() - late;
    let total_ms: u64 = windows.iter().map(|(a, b)| b - a).sum();
    Check {
        name: "no fan let in to an empty map while held seats may come back (stock rule)",
        pass: late == 0,
        detail: format!(
            "{} windows with nothing free and seats in live holds ({:.1} s in all, {} reads); \
             {late} fans let in inside them after the rule's {reaction_ms} ms reaction time \
             ({early} within it)",
            windows.len(),
            total_ms as f64 / 1000.0,
            reads.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fan(lo: u64, hi: u64) -> FanOutcome {
        FanOutcome {
            turn_window_ms: Some((lo, hi)),
            ..FanOutcome::default()
        }
    }

    #[test]
    fn a_turn_inside_an_empty_map_fails_and_one_in_the_reaction_time_does_not() {
        // Empty from 1,000 to 9,000 ms (reads every 1,000 ms), then a seat came back.
        let reads: Vec<Read> = (0..12)
            .map(|i| {
                let t = i * 1000;
                if (1..=9).contains(&i) {
                    (t, 0, 3)
                } else {
                    (t, 1, 2)
                }
            })
            .collect();
        assert_eq!(empty_map_windows(&reads), vec![(1000, 9000)]);
        let ok = check(&[fan(1200, 2000), fan(9500, 10_000)], &reads, 1500);
        assert!(ok.pass, "{}", ok.detail);
        assert!(ok.detail.contains("1 windows") && ok.detail.contains("(1 within it)"));
        let bad = check(&[fan(4000, 5000)], &reads, 1500);
        assert!(!bad.pass, "{}", bad.detail);
        // Sold out (nothing held) is not an empty map that may come back.
        assert!(empty_map_windows(&[(0, 0, 0), (1, 0, 0)]).is_empty());
    }
}
