//! What the fans were told, by join token: the queue number and the admission (its `jti` and
//! `sub`). Filled by every fan as it goes; the chaos checks read it to find a number held by two
//! fans, a fan admitted twice, or a fan whose number changed after a Redis failover.

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One fan as the waiting room answered it.
#[derive(Debug, Clone, Default)]
pub struct Fan {
    /// The queue number (from the join answer or the position read at opening).
    pub number: Option<u64>,
    /// The admission token's `jti`, once admitted.
    pub jti: Option<String>,
    /// The admission token's `sub` (the visitor id), once admitted.
    pub sub: Option<String>,
}

static SEEN: Mutex<BTreeMap<String, Fan>> = Mutex::new(BTreeMap::new());

fn with<R>(f: impl FnOnce(&mut BTreeMap<String, Fan>) -> R) -> R {
    f(&mut SEEN.lock().expect("seen"))
}

/// A fan joined with `token` (and, after opening, got `number` at once).
pub fn join(token: &str, number: Option<u64>) {
    with(|m| m.entry(token.to_owned()).or_default().number = number);
}

/// The fan with `token` read its queue number.
pub fn number(token: &str, n: u64) {
    with(|m| m.entry(token.to_owned()).or_default().number = Some(n));
}

/// The fan with `token` was admitted; `claims` are its admission token's claims.
pub fn admission(token: &str, claims: &Value) {
    with(|m| {
        let f = m.entry(token.to_owned()).or_default();
        f.jti = claims["jti"].as_str().map(str::to_owned);
        f.sub = claims["sub"].as_str().map(str::to_owned);
    });
}

/// Every fan so far, by join token.
pub fn snapshot() -> Vec<(String, Fan)> {
    with(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// Numbers held by more than one fan and visitors (or `jti`s) admitted more than once.
pub fn duplicates(fans: &[(String, Fan)]) -> (Vec<u64>, Vec<String>) {
    let mut numbers = BTreeMap::<u64, usize>::new();
    let mut admitted = BTreeMap::<&str, usize>::new();
    for (_, f) in fans {
        if let Some(n) = f.number {
            *numbers.entry(n).or_default() += 1;
        }
        for id in [&f.sub, &f.jti].into_iter().flatten() {
            *admitted.entry(id.as_str()).or_default() += 1;
        }
    }
    (
        numbers
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .map(|(n, _)| n)
            .collect(),
        admitted
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .map(|(id, _)| id.to_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_held_twice_and_a_visitor_admitted_twice_are_found() {
        let fan = |n: u64, sub: &str, jti: &str| Fan {
            number: Some(n),
            sub: Some(sub.into()),
            jti: Some(jti.into()),
        };
        let ok = vec![
            ("a".to_owned(), fan(1, "v1", "j1")),
            ("b".to_owned(), fan(2, "v2", "j2")),
        ];
        assert_eq!(duplicates(&ok), (vec![], vec![]));
        let bad = vec![
            ("a".to_owned(), fan(1, "v1", "j1")),
            ("b".to_owned(), fan(1, "v1", "j3")),
        ];
        assert_eq!(duplicates(&bad), (vec![1], vec!["v1".to_owned()]));
    }
}
