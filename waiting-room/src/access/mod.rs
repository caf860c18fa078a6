//! Presale and invite-only rooms, access codes (issue 14 item 1): who may join an event. The
//! pure parts live here — the access mode, code normalisation and hashing, generated codes,
//! CSV in and out — and know no framework; the store keeps the hashed codes
//! (`store::access`), the HTTP surface is `http::access` (admin) and the join handler.
//!
//! A code is never stored in clear: the store keeps `HMAC-SHA256(key, event ‖ 0 ‖ code)` in hex,
//! where the key is derived from the node's `join_hmac_key` (label [`CODE_KEY_LABEL`]), so a
//! copy of the store alone lets nobody join, and a code of one event hashes to nothing in another.

pub mod invitation;
pub mod limiter;

use crate::domain::EventId;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Who may join an event. Settable by the operator (`PUT /admin/events/{event}/access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessMode {
    /// Anyone (the default).
    Open,
    /// A new fan must bring one use of a valid access code of the event.
    Code,
    /// A new fan must bring a signed invitation (not built yet: refused by the admin API).
    Invitation,
}

impl AccessMode {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Code => "code",
            Self::Invitation => "invitation",
        }
    }

    /// Parses a stored or wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(Self::Open),
            "code" => Some(Self::Code),
            "invitation" => Some(Self::Invitation),
            _ => None,
        }
    }
}

/// One stored code: its hash, uses left, expiry and tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRecord {
    /// [`CodeHasher::hash`] of the code, 64 hex digits.
    pub hash: String,
    /// Uses left (joins it may still start).
    pub uses: u32,
    /// Expiry, epoch **milliseconds**; 0 = never.
    pub expires_ms: i64,
    /// Tier passed on to the admission (`[a-z0-9-]{1,32}`), if any.
    pub tier: Option<String>,
}

/// What spending one use of a code did (one atomic store step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// One use taken, recorded against the visitor; the code's tier.
    Spent(Option<String>),
    /// No such code in this event (also a code of another event): nothing written.
    Unknown,
    /// No uses left: nothing written.
    UsedUp,
    /// Past its expiry: nothing written.
    Expired,
}

impl Spend {
    /// The problem kind and metric reason of a refusal (`None` for [`Spend::Spent`]).
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            Self::Spent(_) => None,
            Self::Unknown => Some("code-unknown"),
            Self::UsedUp => Some("code-used-up"),
            Self::Expired => Some("code-expired"),
        }
    }
}

/// Key derivation label of the code key (HMAC-SHA256(join_hmac_key, label)).
pub const CODE_KEY_LABEL: &str = "waiting-room access codes v1";

/// Longest code accepted (characters after normalisation).
pub const CODE_MAX_LEN: usize = 64;

/// Most codes one generate or import call handles.
pub const BATCH_MAX: usize = 100_000;

/// Alphabet of generated codes: no 0/O, 1/I/L, so a code read aloud or retyped survives.
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// Characters of a generated code (12 of 31 symbols: ~59 bits).
pub const GENERATED_LEN: usize = 12;

/// Hashes codes of events with the node's code key.
#[derive(Clone)]
pub struct CodeHasher {
    key: [u8; 32],
}

impl std::fmt::Debug for CodeHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CodeHasher(***)")
    }
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length")
}

impl CodeHasher {
    /// The code key derived from `join_hmac_key`.
    pub fn new(join_hmac_key: &[u8]) -> Self {
        let mut m = mac(join_hmac_key);
        m.update(CODE_KEY_LABEL.as_bytes());
        Self {
            key: m.finalize().into_bytes().into(),
        }
    }

    /// The stored form of `code` (already [`normalize`]d) in `event`.
    pub fn hash(&self, event: &EventId, code: &str) -> String {
        let mut m = mac(&self.key);
        m.update(event.as_str().as_bytes());
        m.update(&[0]);
        m.update(code.as_bytes());
        hex::encode(m.finalize().into_bytes())
    }
}

/// A code as typed or imported → its canonical form: ASCII letters upper-cased, spaces and `-`
/// dropped; `None` unless 4..=[`CODE_MAX_LEN`] letters and digits remain.
pub fn normalize(raw: &str) -> Option<String> {
    let s: String = raw
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let ok = (4..=CODE_MAX_LEN).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then_some(s)
}

/// A fresh random code of [`GENERATED_LEN`] characters, shown as `XXXX-XXXX-XXXX`.
pub fn generate() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let raw: Vec<u8> = (0..GENERATED_LEN)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect();
    raw.chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("-")
}

/// A tier name: `[a-z0-9-]{1,32}`.
pub fn valid_tier(t: &str) -> bool {
    (1..=32).contains(&t.len())
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// One row of an imported CSV: `code[,uses[,expires_ms[,tier]]]` (empty cells take the
/// request's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvRow {
    /// The normalised code.
    pub code: String,
    /// Uses, if the row says.
    pub uses: Option<u32>,
    /// Expiry epoch ms, if the row says.
    pub expires_ms: Option<i64>,
    /// Tier, if the row says.
    pub tier: Option<String>,
}

/// Parses a CSV of codes: a line whose first cell is `code` (any case) is a header wherever it
/// is, so generated files joined with `cat` read as one (the word `code` is never a code);
/// blank lines skipped. With `codes_only` (a revocation list) only the first column is read and
/// the others may hold anything (a note, the generated file's own columns). An error names the
/// 1-based line.
pub fn parse_csv(body: &str, codes_only: bool) -> Result<Vec<CsvRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in body.lines().enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if cells[0].is_empty() || cells[0].eq_ignore_ascii_case("code") {
            continue;
        }
        let bad = |what: &str| format!("line {}: {what}", i + 1);
        let code = normalize(cells[0]).ok_or_else(|| bad("code: 4..=64 letters or digits"))?;
        let cell = |k: usize| {
            cells
                .get(k)
                .copied()
                .filter(|c| !c.is_empty() && !codes_only)
        };
        let uses = cell(1)
            .map(|c| {
                c.parse()
                    .ok()
                    .filter(|u| *u > 0)
                    .ok_or_else(|| bad("uses: 1.."))
            })
            .transpose()?;
        let expires_ms = cell(2)
            .map(|c| {
                c.parse()
                    .ok()
                    .filter(|e| *e >= 0)
                    .ok_or_else(|| bad("expires_ms: >= 0"))
            })
            .transpose()?;
        let tier = cell(3)
            .map(|t| {
                valid_tier(t)
                    .then(|| t.to_owned())
                    .ok_or_else(|| bad("tier: [a-z0-9-]{1,32}"))
            })
            .transpose()?;
        rows.push(CsvRow {
            code,
            uses,
            expires_ms,
            tier,
        });
        if rows.len() > BATCH_MAX {
            return Err(format!("at most {BATCH_MAX} codes per file"));
        }
    }
    Ok(rows)
}

/// The CSV handed to the operator for generated codes (the only time they exist in clear).
pub fn to_csv(codes: &[String], uses: u32, expires_ms: i64, tier: Option<&str>) -> String {
    let mut out = String::from("code,uses,expires_ms,tier\n");
    for c in codes {
        out.push_str(&format!("{c},{uses},{expires_ms},{}\n", tier.unwrap_or("")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_hashes_differently_per_event_and_ignores_dashes_and_case() {
        let h = CodeHasher::new(b"k");
        let (a, b) = (EventId::parse("a").unwrap(), EventId::parse("b").unwrap());
        let code = normalize("abcd-efgh-2345").unwrap();
        assert_eq!(code, "ABCDEFGH2345");
        assert_eq!(
            h.hash(&a, &code),
            h.hash(&a, &normalize("ABCD EFGH 2345").unwrap())
        );
        assert_ne!(h.hash(&a, &code), h.hash(&b, &code));
        assert_eq!(normalize("a-b"), None);
        assert_eq!(
            normalize(generate().as_str()).map(|c| c.len()),
            Some(GENERATED_LEN)
        );
    }

    #[test]
    fn csv_round_trips_and_names_the_bad_line() {
        let csv = to_csv(&["AAAA-BBBB".into()], 2, 0, Some("vip"));
        let rows = parse_csv(&csv, false).unwrap();
        assert_eq!(rows[0].code, "AAAABBBB");
        assert_eq!(
            (rows[0].uses, rows[0].tier.as_deref()),
            (Some(2), Some("vip"))
        );
        assert_eq!(
            parse_csv("code\nAAAA,0\n", false).unwrap_err(),
            "line 2: uses: 1.."
        );
    }

    /// Newcomer review: a header after the first line was imported as the code `code`, and a
    /// revocation list read every column ("GOOD-CODE-0001,leaked on forum" → "uses: 1..").
    #[test]
    fn every_header_line_is_skipped_and_a_revocation_list_reads_its_first_column() {
        let two_files = format!(
            "{}{}",
            to_csv(&["AAAA-1111".into()], 1, 0, None),
            to_csv(&["BBBB-2222".into()], 1, 0, None)
        );
        let codes: Vec<String> = parse_csv(&two_files, false)
            .unwrap()
            .into_iter()
            .map(|r| r.code)
            .collect();
        assert_eq!(codes, ["AAAA1111", "BBBB2222"]);
        assert!(parse_csv("code\nGOOD-0015\nCODE\n", false)
            .unwrap()
            .iter()
            .all(|r| r.code != "CODE"));
        let revoked = parse_csv("GOOD-CODE-0001,leaked on forum\n", true).unwrap();
        assert_eq!(
            (revoked[0].code.as_str(), revoked[0].uses),
            ("GOODCODE0001", None)
        );
        assert!(parse_csv("GOOD-CODE-0001,leaked on forum\n", false).is_err());
    }
}
