//! `gantry-bench`: Gantry's performance figures, printed, never asserted
//! (tests assert behaviour; speed is measured here). Each bench brings its
//! own temporary database; `docker` and `terminal` need a Docker Engine
//! (`scripts/dockerd.sh`), `terminal` the `gantry` binary built beside this
//! one. `scripts/bench.sh` runs them all on a release build.

mod admissions;
mod docker;
mod matching;
mod telemetry;
mod terminal;
mod upload;

use clap::{Parser, Subcommand};
use gantry_platform::PlatformError;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "gantry-bench", about = "Gantry's performance figures")]
struct Cli {
    /// Where the upload bench puts its temporary files (unless `--dir`).
    #[arg(long, env = "GANTRY_DATA_DIR", default_value = "data", global = true)]
    data_dir: PathBuf,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Create requests through the admission path on a simulated cluster (temporary database).
    Admissions {
        #[arg(long, default_value_t = 1000)]
        nodes: u32,
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u32,
        #[arg(long, default_value_t = 8000)]
        requests: usize,
    },
    /// Dev machines created at once on the local Docker Engine, with and without the volume pool, against raw Engine API calls.
    Docker {
        #[arg(long, default_value_t = 20)]
        machines: usize,
        /// Rounds of the three runs; the medians are printed last.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Compute-task matching: decisions on 100 regions x 100 nodes x 8 GPUs, and a queue pass over 10,000 tasks.
    Matching,
    /// Browser terminal: keystroke echo through Gantry next to `docker exec -it`, and server memory per open terminal.
    Terminal(terminal::TerminalBenchArgs),
    /// Dataset upload: a large file into both directory stores over loopback, next to two cp's of it; peak memory.
    Upload(upload::UploadBenchArgs),
    /// GPU telemetry: ingest rate, a 7-day node chart and the cluster overview over 1,000 GPUs x 7 days; bytes per GPU-day.
    Telemetry(telemetry::TelemetryBenchArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,sqlx=warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let result: Result<(), PlatformError> = match cli.bench {
        Bench::Admissions { nodes, gpus_per_node, requests } => {
            admissions::admissions(nodes, gpus_per_node, requests).await
        }
        Bench::Docker { machines, rounds } => docker::run(machines, rounds.max(1)).await,
        Bench::Matching => matching::run().await,
        Bench::Terminal(args) => terminal::run(args).await,
        Bench::Upload(args) => upload::run(args, &cli.data_dir).await,
        Bench::Telemetry(args) => telemetry::run(args).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
