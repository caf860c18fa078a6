//! `--profile seed|ci`: fills every `rush` figure the command line did not set explicitly.

use super::RushArgs;
use crate::rehearsal::Profile;
use clap::parser::ValueSource;
use clap::ArgMatches;

/// Applies the profile named in `args` to every field whose flag was not given.
pub fn apply(args: &mut RushArgs, m: &ArgMatches) {
    let Some(p) = args.rehearsal.profile else {
        return;
    };
    let unset = |id: &str| {
        !matches!(
            m.value_source(id),
            Some(ValueSource::CommandLine) | Some(ValueSource::EnvVariable)
        )
    };
    macro_rules! set {
        ($($field:ident).+ = $v:expr) => {{
            let id = stringify!($($field).+).rsplit('.').next().unwrap_or_default();
            if unset(id) {
                args.$($field).+ = $v;
            }
        }};
    }
    match p {
        Profile::Seed => {
            set!(fans = 40_000);
            // 20,700 places: 18,700 seats in 13 sections and a 2,000-place FLOOR pool.
            set!(seats = 18_700);
            set!(pool_places = 2_000);
            set!(best_available_share = 0.3);
            set!(pool_share = 0.1);
            set!(admit_rate = 2_000.0);
            set!(max_active = 40_000);
            // DESIGN: admission tokens live minutes.
            // (10 minutes: longer than a patient fan keeps looking for a seat.)
            set!(admission_ttl = 600);
            // 40,000 fans polling once a second is the CDN's load, not the origin's.
            set!(shared_status = true);
            // Seed 002: the hottest show's holds go through one queue, no lock waits.
            set!(hold_queue = true);
            set!(pay_share = 0.6);
            set!(cancel_share = 0.1);
            set!(concurrency = 768);
            set!(timeout = 900);
            set!(rehearsal.pay_slowly_share = 0.1);
            set!(rehearsal.pay_late_share = 0.03);
            set!(rehearsal.same_key_share = 0.05);
            set!(rehearsal.tabs_share = 0.05);
            set!(rehearsal.late_share = 0.1);
            set!(rehearsal.late_window = 15);
            // Fans who find every place held wait for lapsed holds (and then pay) for longer
            // than a hold lives, so the walk-aways' seats are sold again and the show sells out.
            set!(rehearsal.sold_out_patience = 360);
            // Shorter than the seed's 8/7 minutes so walk-aways' seats lapse within the run.
            set!(rehearsal.hold_ttl = Some(60));
            set!(rehearsal.payment_session = Some(45));
            set!(quiet = true);
        }
        Profile::Ci => {
            set!(fans = 300);
            set!(seats = 100);
            set!(concurrency = 64);
            set!(admit_rate = 25.0);
            set!(max_active = 300);
            set!(admission_ttl = 90);
            set!(opens_in = Some(3));
            set!(pay_share = 0.7);
            set!(cancel_share = 0.1);
            set!(timeout = 240);
            set!(rehearsal.pay_slowly_share = 0.1);
            set!(rehearsal.pay_late_share = 0.05);
            set!(rehearsal.same_key_share = 0.1);
            set!(rehearsal.tabs_share = 0.1);
            set!(rehearsal.late_share = 0.1);
            set!(rehearsal.late_window = 3);
            set!(rehearsal.sold_out_patience = 40);
            set!(rehearsal.hold_ttl = Some(20));
            set!(rehearsal.payment_session = Some(15));
            set!(quiet = true);
        }
    }
}
