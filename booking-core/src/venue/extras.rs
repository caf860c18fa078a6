//! The venue file's optional fields beside seats and pools (DECISIONS "the venue file's next
//! version lands once"): `currency`, `time_zone`, `layout` (stage and section shapes) and
//! `tiers`. Parsed and validated here and exposed as they are; the fan pages show prices in
//! `currency` and draw the `layout`.
//!
//! Layer: the bottom (part of `venue`); imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// Default `currency`.
pub fn default_currency() -> String {
    "EUR".into()
}

/// Default `time_zone`.
pub fn default_time_zone() -> String {
    "UTC".into()
}

/// A closed outline in layout units (integers, y down): at least three points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Corners in order, `[x, y]`.
    pub points: Vec<[i32; 2]>,
}

/// A section's outline on the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectionShape {
    /// A section name of the venue.
    pub section: String,
    /// Its outline.
    pub shape: Shape,
}

/// The venue's plan: the stage and the sections' outlines (both optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// The stage's outline.
    #[serde(default)]
    pub stage: Option<Shape>,
    /// Section outlines, at most one per section.
    #[serde(default)]
    pub sections: Vec<SectionShape>,
}

/// A named price tier over some sections (shown to fans; seat prices stay per section).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// Tier name, 1 to 40 characters.
    pub name: String,
    /// The sections it covers (names of the venue's sections).
    #[serde(default)]
    pub sections: Vec<String>,
    /// Tier-only (issue 14 item 3; default `false`: the tier only names prices): seats of its
    /// sections are held only by fans whose admission token's `tier` claim is this tier's name
    /// (or another restricted tier's covering the same section).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restricted: bool,
}

/// The tiers whose fans alone may hold seats of `section` (empty: anyone may).
pub fn tiers_only<'a>(tiers: &'a [Tier], section: &str) -> Vec<&'a str> {
    tiers
        .iter()
        .filter(|t| t.restricted && t.sections.iter().any(|s| s == section))
        .map(|t| t.name.as_str())
        .collect()
}

/// `currency`: an ISO 4217 code, three capital letters.
pub fn check_currency(c: &str) -> Result<(), String> {
    if c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(format!(
            "currency: {c:?} must be an ISO 4217 code (three capital letters)"
        ))
    }
}

/// `time_zone`: a name the IANA time-zone database knows (bundled with `jiff`).
pub fn check_time_zone(tz: &str) -> Result<(), String> {
    jiff::tz::TimeZone::get(tz)
        .map(|_| ())
        .map_err(|_| format!("time_zone: {tz:?} is not an IANA time zone (e.g. Europe/Paris)"))
}

fn check_shape(field: &str, s: &Shape) -> Result<(), String> {
    if s.points.len() < 3 {
        return Err(format!(
            "{field}.points: an outline needs at least 3 points"
        ));
    }
    Ok(())
}

/// `layout`: shapes of at least three points, each outline of a known section, once.
pub fn check_layout(l: &Layout, sections: &[&str]) -> Result<(), String> {
    if let Some(stage) = &l.stage {
        check_shape("layout.stage", stage)?;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, s) in l.sections.iter().enumerate() {
        if !sections.contains(&s.section.as_str()) {
            return Err(format!(
                "layout.sections[{i}].section: {:?} is not a section of the venue",
                s.section
            ));
        }
        if !seen.insert(&s.section) {
            return Err(format!(
                "layout.sections[{i}].section: {:?} has two outlines",
                s.section
            ));
        }
        check_shape(&format!("layout.sections[{i}].shape"), &s.shape)?;
    }
    Ok(())
}

/// `tiers`: unique names of 1 to 40 characters over known sections.
pub fn check_tiers(tiers: &[Tier], sections: &[&str]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (i, t) in tiers.iter().enumerate() {
        if !(1..=40).contains(&t.name.chars().count()) {
            return Err(format!("tiers[{i}].name: 1 to 40 characters"));
        }
        if !seen.insert(&t.name) {
            return Err(format!("tiers[{i}].name: duplicate tier {:?}", t.name));
        }
        if let Some(s) = t.sections.iter().find(|s| !sections.contains(&s.as_str())) {
            return Err(format!(
                "tiers[{i}].sections: {s:?} is not a section of the venue"
            ));
        }
    }
    Ok(())
}
