//! `phasedb`: runs benchmarks on the embedded engine.

mod bench;
mod cluster;
mod experiment;
mod report;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// phasedb: an in-memory transactional database for comparing concurrency-control protocols.
#[derive(Parser)]
#[command(name = "phasedb", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one benchmark on the embedded engine and report throughput, aborts and latency.
    Bench(bench::BenchArgs),
    /// Run one of the seeds' experiments (a sweep) and write its CSV, SVG plot and report.
    Experiment(experiment::ExperimentArgs),
    /// Run one cluster member (`--config cluster.toml --id N`) until SIGINT or SIGTERM.
    Node(cluster::node::NodeArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Experiment(args) => experiment::run(args),
        Command::Node(args) => cluster::node::run(args),
    };
    std::process::exit(code);
}
