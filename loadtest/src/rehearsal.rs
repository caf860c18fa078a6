//! The rehearsal's extra `rush` flags (flattened into `RushArgs`): a `--profile`, behaviour
//! shares, late arrivals, hold and payment lifetimes, and the report folder; plus the checks and
//! the report written after the fans finished.

use crate::model::{Check, FanOutcome};
use crate::timeline::{Sample, Timeline};
use std::path::PathBuf;

/// A named set of defaults for `rush`; any flag given on the command line wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// The seeds' passing rehearsal: 40,000 fans, 20,700 places (18,700 seats in 13 sections and
    /// a 2,000-place pool), admissions at 2,000/s, then late arrivals and retries.
    Seed,
    /// A small run for CI (300 fans, 100 seats, every behaviour).
    Ci,
}

/// Rehearsal flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RehearsalArgs {
    /// Defaults for every figure (`seed` or `ci`); flags given explicitly override them.
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Share of fans who pay slowly (half the payment window later).
    #[arg(long, default_value_t = 0.0)]
    pub pay_slowly_share: f64,
    /// Share of fans who press Pay one second after the payment deadline.
    #[arg(long, default_value_t = 0.0)]
    pub pay_late_share: f64,
    /// Share of fans who send their hold twice with the same Idempotency-Key.
    #[arg(long, default_value_t = 0.0)]
    pub same_key_share: f64,
    /// Share of fans who hold from several tabs at once with one admission token.
    #[arg(long, default_value_t = 0.0)]
    pub tabs_share: f64,
    /// Tabs per several-tab fan.
    #[arg(long, default_value_t = 3)]
    pub tabs: usize,
    /// Share of fans who arrive after the sale opened (late arrivals).
    #[arg(long, default_value_t = 0.0)]
    pub late_share: f64,
    /// Late arrivals join spread over this many seconds after opening.
    #[arg(long, default_value_t = 10)]
    pub late_window: u64,
    /// Seconds a fan who finds no free seat keeps looking (held seats lapse and are resold).
    #[arg(long, default_value_t = 0)]
    pub sold_out_patience: u64,
    /// Hold lifetime at the spawned booking core, seconds (default: the launcher's 480).
    #[arg(long)]
    pub hold_ttl: Option<u64>,
    /// Payment-session lifetime, seconds; shorter than the hold (default: the launcher's 420).
    #[arg(long)]
    pub payment_session: Option<u64>,
    /// Report folder (default `target/rush-report/<UTC timestamp>`).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write no report folder.
    #[arg(long)]
    pub no_report: bool,
}

impl RehearsalArgs {
    /// The behaviour mix these flags describe.
    pub fn mix(&self) -> crate::model::Mix {
        crate::model::Mix {
            pay_slowly: self.pay_slowly_share,
            pay_late: self.pay_late_share,
            same_key_retry: self.same_key_share,
            tabs_share: self.tabs_share,
            tabs: self.tabs,
            sold_out_patience_secs: self.sold_out_patience,
        }
    }

    /// The report folder, `None` with `--no-report`.
    pub fn report_dir(&self) -> Option<PathBuf> {
        if self.no_report {
            return None;
        }
        Some(self.report.clone().unwrap_or_else(|| {
            let t = time::OffsetDateTime::now_utc();
            let stamp = format!(
                "{:04}{:02}{:02}-{:02}{:02}{:02}",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            );
            PathBuf::from("target/rush-report").join(stamp)
        }))
    }
}

/// The rehearsal checks that need the fans, the samples and the back office's seat counts.
pub fn checks(
    fans: &[FanOutcome],
    samples: &[Sample],
    office_stats: &serde_json::Value,
) -> Vec<Check> {
    let capacity = office_stats["capacity"].as_u64().unwrap_or(0);
    let sold = office_stats["sold"].as_u64().unwrap_or(0);
    let mut out: Vec<Check> = crate::order::stopped_at_cap(fans, samples, capacity, sold)
        .into_iter()
        .collect();
    out.extend(crate::order::admission_order(fans));
    out.extend(crate::order::shuffle(fans));
    if fans.iter().any(|f| f.tabs_won.is_some()) {
        out.push(crate::order::tabs(fans));
    }
    if fans.iter().any(|f| f.idempotent_checked) {
        out.push(crate::order::idempotency(fans));
    }
    out
}

/// Admission and payment times (ms since the origin) of the fans, for the per-second series.
pub fn timeline(fans: &[FanOutcome], samples: Vec<Sample>) -> Timeline {
    let adm: Vec<u64> = fans.iter().filter_map(|f| f.admitted_at_ms).collect();
    let paid: Vec<u64> = fans.iter().filter_map(|f| f.paid_at_ms).collect();
    Timeline::series(samples, &adm, &paid)
}
