//! The admission tokens the hold phases spend, each at most once in a run.
//!
//! A released hold ends its admission's booking rights, so a token used again answers
//! `409 admission-ended`: a cheap refusal that counts as a request and inflates a hold phase's
//! req/s (one run's pool-queue phase: 5,274 of them, from a token list that wrapped around). The
//! claim phase mints only as many tokens as it claims in its window, so before each hold phase
//! [`Admissions::top_up`] mints more, untimed: it claims join tokens the join phase kept and the
//! claim phase did not reach, and joins new visitors when those run out. A phase that still runs
//! out reuses tokens and says how many ([`Admissions::reused`]).

use super::phases::Ctx;
use futures::StreamExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Admission tokens in the order they are handed out, and the join tokens not yet claimed.
#[derive(Debug)]
pub struct Admissions {
    /// Every admission token minted, and how many of them were handed out.
    tokens: Mutex<(Vec<String>, usize)>,
    /// Join tokens of admitted visitors whose admission is not claimed yet.
    joins: Mutex<Vec<String>>,
    /// Tokens handed out a second time (the list ran out mid-phase).
    reused: AtomicU64,
}

impl Admissions {
    /// `tokens`: the claim phase's admission tokens; `joins`: join tokens it did not claim.
    pub fn new(tokens: Vec<String>, joins: Vec<String>) -> Self {
        Self {
            tokens: Mutex::new((tokens, 0)),
            joins: Mutex::new(joins),
            reused: AtomicU64::new(0),
        }
    }

    /// The next unused token; when none is left, a used one again (counted in `reused`).
    /// `None` only when no token was ever minted.
    pub fn take(&self) -> Option<String> {
        let mut g = self.tokens.lock().expect("admissions");
        let (v, next) = &mut *g;
        if v.is_empty() {
            return None;
        }
        if *next < v.len() {
            *next += 1;
            return Some(v[*next - 1].clone());
        }
        let n = self.reused.fetch_add(1, Ordering::Relaxed);
        Some(v[n as usize % v.len()].clone())
    }

    /// Tokens not handed out yet.
    pub fn unused(&self) -> usize {
        let g = self.tokens.lock().expect("admissions");
        g.0.len() - g.1
    }

    /// Tokens handed out a second time so far.
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    /// Mints tokens (untimed) until at least `need` are unused: claims kept join tokens first,
    /// then joins new visitors and waits for the cursor to pass them. `ctx.connections`
    /// requests at a time. Errors when a round mints nothing (the waiting room refuses).
    pub async fn top_up(&self, ctx: &Ctx, need: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        let before = self.unused();
        while self.unused() < need {
            let want = need - self.unused();
            let mut joins = {
                let mut j = self.joins.lock().expect("joins");
                let at = j.len().saturating_sub(want);
                j.split_off(at)
            };
            if joins.len() < want {
                joins.extend(join_admitted(ctx, want - joins.len()).await?);
            }
            let minted = claim_all(ctx, joins).await;
            anyhow::ensure!(!minted.is_empty(), "no admission claimed while topping up");
            self.tokens.lock().expect("admissions").0.extend(minted);
        }
        let minted = self.unused() - before;
        if minted > 0 {
            println!(
                "  (untimed: {minted} admission tokens minted in {:.1} s, {} unused)",
                started.elapsed().as_secs_f64(),
                self.unused()
            );
        }
        Ok(())
    }
}

/// Joins `n` new visitors and waits until the cursor has passed them; their join tokens.
async fn join_admitted(ctx: &Ctx, n: usize) -> anyhow::Result<Vec<String>> {
    let url = format!("{}/api/events/{}/join", ctx.waiting_room(), ctx.show());
    let joined: Vec<Option<String>> = futures::stream::iter(0..n)
        .map(|_| {
            let req = ctx.client().post(&url);
            async move {
                let body: serde_json::Value = req.send().await.ok()?.json().await.ok()?;
                body["join_token"].as_str().map(String::from)
            }
        })
        .buffer_unordered(ctx.connections())
        .collect()
        .await;
    let joined: Vec<String> = joined.into_iter().flatten().collect();
    anyhow::ensure!(!joined.is_empty(), "no join succeeded while topping up");
    ctx.wait_cursor(Duration::from_secs(120)).await?;
    Ok(joined)
}

/// Claims each join token's admission once; the admission tokens.
async fn claim_all(ctx: &Ctx, joins: Vec<String>) -> Vec<String> {
    let url = format!("{}/api/events/{}/admission", ctx.waiting_room(), ctx.show());
    let claimed: Vec<Option<String>> = futures::stream::iter(joins)
        .map(|j| {
            let req = ctx.client().post(&url).bearer_auth(j);
            async move {
                let body: serde_json::Value = req.send().await.ok()?.json().await.ok()?;
                body["admission_token"].as_str().map(String::from)
            }
        })
        .buffer_unordered(ctx.connections())
        .collect()
        .await;
    claimed.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each token is handed out once; past the end the list wraps and the reuse is counted.
    #[test]
    fn tokens_are_handed_out_once_and_a_reuse_is_counted() {
        let a = Admissions::new(vec!["a".into(), "b".into()], Vec::new());
        assert_eq!(a.take().as_deref(), Some("a"));
        assert_eq!(a.take().as_deref(), Some("b"));
        assert_eq!((a.unused(), a.reused()), (0, 0));
        assert!(a.take().is_some());
        assert_eq!(a.reused(), 1);
        a.tokens.lock().unwrap().0.push("c".into());
        assert_eq!(a.unused(), 1);
        assert_eq!(a.take().as_deref(), Some("c"));
        assert!(Admissions::new(Vec::new(), Vec::new()).take().is_none());
    }
}
