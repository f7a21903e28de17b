//! `phasedb serve`: runs the engine behind the client protocol until SIGINT or SIGTERM.

use std::net::SocketAddr;

use clap::Args;
use phasedb_server::{PROTOCOLS, Server, ServerConfig};

/// `phasedb serve` arguments.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; give 0.0.0.0:PORT to serve other hosts).
    #[arg(long, default_value = "127.0.0.1:7600")]
    listen: SocketAddr,
    /// Concurrency-control protocol of the engine.
    #[arg(long, short, default_value = "occ", value_parser = clap::builder::PossibleValuesParser::new(PROTOCOLS))]
    protocol: String,
    /// Engine threads running transactions (default: the number of cores).
    #[arg(long, short)]
    threads: Option<usize>,
    /// Network runtime threads.
    #[arg(long, default_value_t = 1)]
    io_threads: usize,
    /// A file holding the token clients must present (surrounding whitespace ignored).
    #[arg(long, value_name = "F")]
    token_file: Option<std::path::PathBuf>,
    /// The largest request frame accepted, in bytes.
    #[arg(long, default_value_t = phasedb_proto::DEFAULT_MAX_FRAME)]
    max_frame: usize,
    /// The most connections served at once.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
}

/// Runs `phasedb serve`; returns the exit code.
pub fn run(args: ServeArgs) -> i32 {
    let token = match &args.token_file {
        None => None,
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            Ok(_) => {
                eprintln!("error: the token file {} is empty", path.display());
                return 2;
            }
            Err(e) => {
                eprintln!("error: cannot read the token file {}: {e}", path.display());
                return 2;
            }
        },
    };
    if args.io_threads == 0 || args.io_threads > 256 {
        eprintln!("error: --io-threads must be between 1 and 256");
        return 2;
    }
    if !(64..=1 << 30).contains(&args.max_frame) {
        eprintln!("error: --max-frame must be between 64 bytes and 1 GiB");
        return 2;
    }
    let config = ServerConfig {
        listen: args.listen,
        protocol: args.protocol.clone(),
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        io_threads: args.io_threads,
        token,
        max_frame: args.max_frame,
        max_connections: args.max_connections,
    };
    let server = match Server::start(&config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    eprintln!(
        "phasedb serving {} on {} with {} engine threads{}",
        config.protocol,
        server.addr(),
        config.threads,
        if config.token.is_some() {
            ", token required"
        } else {
            ""
        }
    );
    match server.run_until_signal() {
        Ok(()) => {
            eprintln!("phasedb stopped");
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
