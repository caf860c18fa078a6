//! `loadtest`: the launch rehearsal. Talks HTTP only to the services; with `--spawn` it starts
//! them itself (in this process, on random loopback ports) through the launcher library.
//!
//! Must not touch: any service's store directly — every figure `rush` checks comes from HTTP
//! answers. One exception: `bench` measures Redis memory per queued fan by calling the waiting
//! room's own `RedisStore::join` on a throw-away event.

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod behaviour;
mod bench;
mod calibrate;
mod calls;
mod chaos;
mod checks;
mod cluster;
mod fan;
mod intervals;
mod model;
mod seen;
mod stats;
mod stock;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "loadtest", about = "Launch rehearsal for the 10:00 sale")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs N synthetic fans through the whole journey and checks the invariants.
    Rush(Box<rush::RushArgs>),
    /// Measures every speed figure (requests/s, ratio to /healthz, p50/p99) and writes JSON.
    Bench(bench::BenchArgs),
    /// Ramps holds on one hot show to find the sustainable rate; recommends (and can apply)
    /// the admit rate and max_active.
    Calibrate(calibrate::CalibrateArgs),
    /// Runs 2,000 status pollers through nginx with and without conditional revalidation and
    /// prints the requests and bytes the origin served each way.
    Revalidate(revalidate::RevalidateArgs),
    /// Join throughput of the queue store: one Redis, a Redis Cluster, and the cluster with the
    /// failover guarantee (WAIT for a replica), in one run.
    Joins(joins::JoinsArgs),
}

mod joins;
mod lateness;
mod order;
mod picks;
mod rehearsal;
mod report;
mod revalidate;
mod rush;
mod timeline;
mod wait_range;

/// Worker threads of each spawned service's own runtime: `asked`, else one per CPU (`0`: the
/// services share the load generator's runtime, as before `--service-threads`).
pub fn service_threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // `rush`: the fans' worker threads at `--generator-nice` (`lateness`). The services of
    // `--spawn` start their own runtimes from the main thread, at its priority.
    let nice = match &cli.command {
        Command::Rush(args) => args.generator_nice,
        _ => 0,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if nice != 0 {
        builder.on_thread_start(move || lateness::set_this_thread(nice));
    }
    let rt = builder.enable_all().build().expect("tokio runtime");
    let result = rt.block_on(async {
        match cli.command {
            Command::Rush(mut args) => {
                if let Some(m) = matches.subcommand_matches("rush") {
                    rush::apply_profile(&mut args, m);
                }
                rush::run(*args).await
            }
            Command::Bench(args) => bench::run(args).await,
            Command::Calibrate(args) => calibrate::run(args).await,
            Command::Revalidate(args) => revalidate::run(args).await,
            Command::Joins(args) => joins::run(args).await,
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("loadtest: {e:#}");
            ExitCode::from(2)
        }
    }
}
