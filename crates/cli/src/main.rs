//! `phasedb`: runs benchmarks on the embedded engine, cluster nodes, and the engine as a server.

mod bench;
mod bench_shift;
mod cluster;
mod experiment;
mod history;
mod remote_bench;
mod report;
mod serve;

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
    Bench(Box<bench::BenchArgs>),
    /// Run one of the seeds' experiments (a sweep) and write its CSV, SVG plot and report.
    Experiment(experiment::ExperimentArgs),
    /// Run one cluster member (`--config cluster.toml --id N`) until SIGINT or SIGTERM.
    Node(cluster::node::NodeArgs),
    /// Serve the engine to clients over TCP (docs/wire-protocol.md) until SIGINT or SIGTERM.
    Serve(serve::ServeArgs),
}

/// The path that starts another process of this very program, for point processes and cluster
/// nodes: on Linux `/proc/self/exe`, which still names this build after the file it was started
/// from is rebuilt or removed (so a long experiment never mixes builds, nor fails half-way because
/// `cargo build` replaced the binary); elsewhere the path it was started from.
pub(crate) fn this_program() -> std::io::Result<std::path::PathBuf> {
    let own = std::path::Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && own.exists() {
        Ok(own.to_path_buf())
    } else {
        std::env::current_exe()
    }
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Bench(args) => bench::run(*args),
        Command::Experiment(args) => experiment::run(args),
        Command::Node(args) => cluster::node::run(args),
        Command::Serve(args) => serve::run(args),
    };
    std::process::exit(code);
}
