//! Venues: discrete seats in sections and rows with a price per section, and general-admission
//! pools (seed 001 "Counters for Pooled Inventory"). A venue is built in code (the demo and test
//! venues, the launcher's rectangular venue) or loaded from a JSON venue file (format in
//! booking-core/README.md, example `infra/venues/arena-20k.json`).
//!
//! Seat ids are `"{section}-{row}-{n}"`, rows and seats numbered from 1.
//!
//! The file's optional fields (issue 17; DECISIONS "the venue file's next version lands once"):
//! `currency` (default EUR), `time_zone` (IANA, default UTC), `layout` and `tiers` ([`extras`]),
//! and interval `resources` ([`resources`]). A file without them reads as before.
//!
//! Layer: the bottom; imports nothing from the crate (`config` re-exports its types).

pub mod extras;
pub mod resources;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use extras::{Layout, SectionShape, Shape, Tier};
pub use resources::{IntervalError, ResourceKind, Window};

/// One seat section: name (`"A"`), price per seat in cents, and its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// Section name, `[A-Za-z0-9]{1,12}`, used in seat ids `"{section}-{row}-{n}"`.
    pub name: String,
    /// Price of every seat in the section, cents.
    pub price_cents: i64,
    /// Booking fee per seat, cents (default 0; the venue file's next version): a seat costs
    /// `price_cents + fee_cents`, which is what its seat-map `price_cents`, holds and refunds
    /// count; the pages show the two apart.
    #[serde(default)]
    pub fee_cents: i64,
    /// Seats in each row, row 1 first. Empty: the venue's `rows` × `seats_per_row`.
    #[serde(default)]
    pub rows: Vec<u32>,
}

/// A general-admission pool: `capacity` interchangeable units at one price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Pool id, `[A-Za-z0-9-]{1,40}`, never a seat id.
    pub id: String,
    /// Price per unit, cents.
    pub price_cents: i64,
    /// Physical capacity, units (an oversell allowance is set by an operator, never here).
    pub capacity: u32,
}

/// A venue: seat sections (rectangular by default) and pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Venue {
    /// Display name (venue files).
    #[serde(default)]
    pub name: String,
    /// Sections in order.
    pub sections: Vec<Section>,
    /// Rows of a section without its own `rows` list (numbered from 1).
    #[serde(default)]
    pub rows: u32,
    /// Seats per row of such a section (numbered from 1).
    #[serde(default)]
    pub seats_per_row: u32,
    /// General-admission pools.
    #[serde(default)]
    pub pools: Vec<PoolSpec>,
    /// ISO 4217 currency of every price (default EUR).
    #[serde(default = "extras::default_currency")]
    pub currency: String,
    /// IANA time zone of the venue (default UTC).
    #[serde(default = "extras::default_time_zone")]
    pub time_zone: String,
    /// The plan: stage and section outlines.
    #[serde(default)]
    pub layout: Option<Layout>,
    /// Named price tiers over sections.
    #[serde(default)]
    pub tiers: Vec<Tier>,
    /// Interval resources by kind.
    #[serde(default)]
    pub resources: Vec<ResourceKind>,
}

/// One seat to seed: id, section, row, number, price (cents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatSpec {
    /// `"{section}-{row}-{n}"`.
    pub id: String,
    /// Section name.
    pub section: String,
    /// Row, from 1.
    pub row: u32,
    /// Seat number in the row, from 1.
    pub number: u32,
    /// Price with the section's fee, cents.
    pub price_cents: i64,
}

fn section(name: &str, price_cents: i64) -> Section {
    Section {
        name: name.into(),
        price_cents,
        fee_cents: 0,
        rows: Vec::new(),
    }
}

impl Venue {
    /// The demo venue (API.md): sections A..E, rows 1..10, 12 seats per row = 600 seats.
    pub fn demo() -> Self {
        let prices = [12_000, 9_500, 8_000, 6_500, 5_000];
        let sections = ["A", "B", "C", "D", "E"]
            .iter()
            .zip(prices)
            .map(|(n, p)| section(n, p))
            .collect();
        Self {
            name: "demo".into(),
            sections,
            rows: 10,
            seats_per_row: 12,
            ..Self::empty()
        }
    }

    /// A tiny venue for tests: section `A`, one row of `seats` seats at 5,000 cents.
    pub fn small(seats: u32) -> Self {
        Self {
            name: "small".into(),
            sections: vec![section("A", 5_000)],
            rows: 1,
            seats_per_row: seats,
            ..Self::empty()
        }
    }

    /// Nothing to sell, every optional field at its default (a base for the builders).
    fn empty() -> Self {
        Self {
            name: String::new(),
            sections: Vec::new(),
            rows: 0,
            seats_per_row: 0,
            pools: Vec::new(),
            currency: extras::default_currency(),
            time_zone: extras::default_time_zone(),
            layout: None,
            tiers: Vec::new(),
            resources: Vec::new(),
        }
    }

    /// The kind of interval resource `name` belongs to.
    pub fn resource_kind_of(&self, name: &str) -> Option<&ResourceKind> {
        self.resources
            .iter()
            .find(|k| k.resources.iter().any(|r| r == name))
    }

    /// The kind of interval resource named `kind`.
    pub fn resource_kind(&self, kind: &str) -> Option<&ResourceKind> {
        self.resources.iter().find(|k| k.kind == kind)
    }

    /// Reads and validates a JSON venue file (format: booking-core/README.md).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("venue file {}: {e}", path.display()))?;
        let mut v: Venue = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("venue file {}: {e}", path.display()))?;
        v.resolve_local_times().map_err(anyhow::Error::msg)?;
        v.validate()?;
        Ok(v)
    }

    /// Rewrites every interval window given as a local wall-clock time (`2026-10-25T01:30`, no
    /// offset) into its RFC 3339 instant in UTC, read in the venue's `time_zone` (issue 17
    /// item 4; `sale_common::localtime`). A time in a spring-forward gap or an ambiguous
    /// fall-back hour without an offset is refused, naming its field. Windows with an offset
    /// are kept as given (and checked by [`Venue::validate`]).
    pub fn resolve_local_times(&mut self) -> Result<(), String> {
        use sale_common::localtime;
        if !self.resources.iter().any(|k| {
            k.windows
                .iter()
                .any(|w| !localtime::has_offset(&w.start) || !localtime::has_offset(&w.end))
        }) {
            return Ok(());
        }
        extras::check_time_zone(&self.time_zone)?;
        let zone = self.time_zone.clone();
        for (i, k) in self.resources.iter_mut().enumerate() {
            for (j, w) in k.windows.iter_mut().enumerate() {
                for (end, t) in [("start", &mut w.start), ("end", &mut w.end)] {
                    if localtime::has_offset(t) {
                        continue;
                    }
                    let at = localtime::to_instant(t, &zone).map_err(|e| {
                        format!("resources[{i}].windows[{j}].{end}: {} ({e})", e.kind())
                    })?;
                    *t = at.to_string();
                }
            }
        }
        Ok(())
    }

    /// Seats per row of `s`, row 1 first.
    pub fn rows_of(&self, s: &Section) -> Vec<u32> {
        if s.rows.is_empty() {
            vec![self.seats_per_row; self.rows as usize]
        } else {
            s.rows.clone()
        }
    }

    /// Every seat, in section, row, number order.
    pub fn seats(&self) -> Vec<SeatSpec> {
        let mut out = Vec::new();
        for s in &self.sections {
            for (i, n) in self.rows_of(s).into_iter().enumerate() {
                let row = u32::try_from(i + 1).unwrap_or(u32::MAX);
                out.extend((1..=n).map(|k| SeatSpec {
                    id: format!("{}-{row}-{k}", s.name),
                    section: s.name.clone(),
                    row,
                    number: k,
                    price_cents: s.price_cents + s.fee_cents,
                }));
            }
        }
        out
    }

    /// Number of discrete seats.
    pub fn seat_count(&self) -> u64 {
        self.sections
            .iter()
            .map(|s| self.rows_of(s).iter().map(|n| u64::from(*n)).sum::<u64>())
            .sum()
    }

    /// Seats plus pool units (the physical capacity, without oversell).
    pub fn capacity(&self) -> u64 {
        self.seat_count()
            + self
                .pools
                .iter()
                .map(|p| u64::from(p.capacity))
                .sum::<u64>()
    }

    /// Names are well-formed and unique, prices non-negative, something to sell.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut names = std::collections::HashSet::new();
        for s in &self.sections {
            anyhow::ensure!(
                (1..=12).contains(&s.name.len())
                    && s.name.bytes().all(|b| b.is_ascii_alphanumeric()),
                "section name {:?} must be [A-Za-z0-9]{{1,12}}",
                s.name
            );
            anyhow::ensure!(
                names.insert(s.name.clone()),
                "duplicate section {:?}",
                s.name
            );
            anyhow::ensure!(
                s.price_cents >= 0 && s.fee_cents >= 0,
                "section {} has a negative price or fee_cents",
                s.name
            );
        }
        for p in &self.pools {
            anyhow::ensure!(
                (1..=40).contains(&p.id.len())
                    && p.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
                "pool id {:?} must be [A-Za-z0-9-]{{1,40}}",
                p.id
            );
            anyhow::ensure!(names.insert(p.id.clone()), "duplicate pool {:?}", p.id);
            anyhow::ensure!(p.price_cents >= 0, "pool {} has a negative price", p.id);
        }
        // Interval resources alone are not enough: the stock figures (sold out, the closed
        // loop's stock rule) count seats and pool places only.
        anyhow::ensure!(self.capacity() > 0, "the venue has nothing to sell");
        self.validate_extras().map_err(anyhow::Error::msg)
    }

    /// The optional fields; each problem names its field.
    fn validate_extras(&self) -> Result<(), String> {
        extras::check_currency(&self.currency)?;
        extras::check_time_zone(&self.time_zone)?;
        let sections: Vec<&str> = self.sections.iter().map(|s| s.name.as_str()).collect();
        if let Some(l) = &self.layout {
            extras::check_layout(l, &sections)?;
        }
        extras::check_tiers(&self.tiers, &sections)?;
        let mut kinds = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for (i, k) in self.resources.iter().enumerate() {
            let field = format!("resources[{i}]");
            k.validate(&field)?;
            if !kinds.insert(&k.kind) {
                return Err(format!("{field}.kind: duplicate kind {:?}", k.kind));
            }
            if let Some(r) = k.resources.iter().find(|r| !names.insert(*r)) {
                return Err(format!("{field}.resources: duplicate resource {r:?}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A London venue with one parking kind whose window is `[start, end)` as written.
    fn london_window(start: &str, end: &str) -> Result<Venue, String> {
        let json = format!(
            r#"{{"name":"v","rows":1,"seats_per_row":1,"sections":[{{"name":"A","price_cents":1}}],
            "time_zone":"Europe/London","resources":[{{"kind":"parking","resources":["P1"],
            "slot_minutes":30,"windows":[{{"start":"{start}","end":"{end}"}}]}}]}}"#
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("venue.json");
        std::fs::write(&path, json).unwrap();
        Venue::load(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn dst_gap_local_time_is_refused() {
        // 2026-03-29: London's clocks go from 01:00 GMT to 02:00 BST; 01:30 never happens.
        let e = london_window("2026-03-29T01:30", "2026-03-29T04:00").unwrap_err();
        assert!(
            e.contains("resources[0].windows[0].start: nonexistent-local-time")
                && e.contains("gap"),
            "{e}"
        );
        let v = london_window("2026-03-29T00:30", "2026-03-29T03:00").unwrap();
        let (s, e) = v.resources[0].windows_ms()[0];
        assert_eq!(v.resources[0].windows[0].start, "2026-03-29T00:30:00Z");
        assert_eq!(
            e - s,
            90 * 60_000,
            "00:30 GMT to 03:00 BST is an hour and a half"
        );
    }

    #[test]
    fn dst_overlap_local_time_needs_an_offset() {
        // 2026-10-25: London's 01:00–02:00 happens twice (BST, then GMT).
        let e = london_window("2026-10-25T01:30", "2026-10-25T04:00").unwrap_err();
        assert!(
            e.contains("resources[0].windows[0].start: ambiguous-local-time")
                && e.contains("2026-10-25T01:30+01:00")
                && e.contains("2026-10-25T01:30+00:00"),
            "{e}"
        );
        let first = london_window("2026-10-25T01:30:00+01:00", "2026-10-25T04:00").unwrap();
        let second = london_window("2026-10-25T01:30:00+00:00", "2026-10-25T04:00").unwrap();
        let (a, b) = (
            first.resources[0].windows_ms()[0],
            second.resources[0].windows_ms()[0],
        );
        assert_eq!(b.0 - a.0, 3_600_000, "the two 01:30s are an hour apart");
        assert_eq!(a.1, b.1, "04:00 is not ambiguous");
        assert_eq!(first.resources[0].windows[0].end, "2026-10-25T04:00:00Z");
    }

    #[test]
    fn demo_has_600_seats_with_ids_in_order() {
        let v = Venue::demo();
        assert_eq!(v.seat_count(), 600);
        let s = v.seats();
        assert_eq!(s[0].id, "A-1-1");
        assert_eq!(s[599].id, "E-10-12");
    }

    #[test]
    fn shipped_example_venue_loads_with_about_20000_seats() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/venues/arena-20k.json");
        let v = Venue::load(&path).unwrap();
        assert!(
            (19_000..=21_000).contains(&v.seat_count()),
            "{}",
            v.seat_count()
        );
        assert!(!v.pools.is_empty());
    }

    #[test]
    fn bad_files_are_refused() {
        let bad = r#"{"sections":[{"name":"A-1","price_cents":1,"rows":[2]}]}"#;
        let v: Venue = serde_json::from_str(bad).unwrap();
        assert!(v.validate().is_err());
        assert!(serde_json::from_str::<Venue>(r#"{"sections":[],"x":1}"#).is_err());
    }

    fn with(extra: &str) -> Result<Venue, String> {
        let text = format!(r#"{{"sections":[{{"name":"A","price_cents":1,"rows":[2]}}]{extra}}}"#);
        let v: Venue = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        v.validate().map_err(|e| e.to_string())?;
        Ok(v)
    }

    #[test]
    fn a_sections_fee_is_part_of_its_seats_price_and_never_negative() {
        let text = |fee: i64| {
            format!(
                r#"{{"sections":[{{"name":"A","price_cents":3000,"fee_cents":{fee},"rows":[2]}}]}}"#
            )
        };
        let v: Venue = serde_json::from_str(&text(250)).unwrap();
        v.validate().unwrap();
        assert!(v.seats().iter().all(|s| s.price_cents == 3250));
        assert_eq!(with("").unwrap().sections[0].fee_cents, 0);
        let bad: Venue = serde_json::from_str(&text(-1)).unwrap();
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("fee_cents"));
    }

    #[test]
    fn optional_fields_default_and_old_files_read_as_before() {
        let v = with("").unwrap();
        assert_eq!((v.currency.as_str(), v.time_zone.as_str()), ("EUR", "UTC"));
        assert!(v.layout.is_none() && v.tiers.is_empty() && v.resources.is_empty());
    }

    #[test]
    fn every_new_field_is_read_and_checked_naming_the_field() {
        let v = with(
            r#","currency":"GBP","time_zone":"Europe/London",
            "layout":{"stage":{"points":[[0,0],[10,0],[10,2]]},"sections":[{"section":"A","shape":{"points":[[0,5],[10,5],[10,9],[0,9]]}}]},
            "tiers":[{"name":"premium","sections":["A"]}],
            "resources":[{"kind":"parking","resources":["P1","P2"],"slot_minutes":30,"buffer_minutes":15,
              "price_cents_per_slot":250,"windows":[{"start":"2026-12-31T16:00:00Z","end":"2026-12-31T23:00:00Z"}]}]"#,
        )
        .unwrap();
        assert_eq!(v.resource_kind_of("P2").unwrap().kind, "parking");
        let cases = [
            (r#","currency":"eur""#, "currency"),
            (r#","time_zone":"Mars/Olympus""#, "time_zone"),
            (
                r#","layout":{"stage":{"points":[[0,0]]}}"#,
                "layout.stage.points",
            ),
            (
                r#","layout":{"sections":[{"section":"Z","shape":{"points":[[0,0],[1,0],[1,1]]}}]}"#,
                "layout.sections[0].section",
            ),
            (
                r#","tiers":[{"name":"t","sections":["Q"]}]"#,
                "tiers[0].sections",
            ),
            (
                r#","resources":[{"kind":"k","resources":["R"],"slot_minutes":0,"windows":[]}]"#,
                "resources[0].slot_minutes",
            ),
            (
                r#","resources":[{"kind":"k","resources":["R"],"slot_minutes":30,"windows":[{"start":"2026-12-31T16:00:00Z","end":"2026-12-31T16:45:00Z"}]}]"#,
                "resources[0].windows[0].end",
            ),
            (
                r#","resources":[{"kind":"k","resources":["R"],"slot_minutes":30,"windows":[{"start":"31/12/2026","end":"2026-12-31T16:30:00Z"}]}]"#,
                "resources[0].windows[0].start",
            ),
        ];
        for (extra, field) in cases {
            let e = with(extra).unwrap_err();
            assert!(e.starts_with(field), "{extra}: {e}");
        }
    }
}
