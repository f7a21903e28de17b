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
    /// Engine threads, each serving its connections and running their transactions (default: the
    /// number of cores).
    #[arg(long, short)]
    threads: Option<usize>,
    /// Runtime threads that accept connections (engine threads serve them).
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
    /// Keep the database durably in DIR (created if missing) through the engine's durability
    /// layer (SiloR-style redo logs with group commit by epoch, and checkpoints); DIR also keeps
    /// the table definitions. A commit is answered only once its epoch is durable. On start the
    /// server recovers DIR first (tables, latest checkpoint, then the logs up to the last durable
    /// epoch: every answered commit is back, nothing is half applied) and serves only after that.
    /// Protocols whose commit does not log are refused at start with an error, leaving DIR as it
    /// was (docs/wire-protocol.md, "Durability"). Without it the database is in memory only.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// With --data-dir: fsync after every group commit (group) or never (none: durable means
    /// handed to the operating system, which survives a process crash but not a machine crash).
    #[arg(long, value_enum)]
    fsync: Option<crate::bench::FsyncArg>,
    /// With --data-dir: logger threads (a log file each).
    #[arg(long)]
    loggers: Option<usize>,
}

/// The durability settings of the flags, or why they do not fit together.
fn durability(args: &ServeArgs) -> Result<Option<phasedb_txn::Durability>, String> {
    let Some(dir) = &args.data_dir else {
        if args.fsync.is_some() || args.loggers.is_some() {
            return Err("--fsync and --loggers need --data-dir DIR".into());
        }
        return Ok(None);
    };
    let mut d = phasedb_txn::Durability::new(dir);
    d.loggers = args.loggers.unwrap_or(1);
    if !(1..=64).contains(&d.loggers) {
        return Err("--loggers must be between 1 and 64".into());
    }
    if let Some(f) = args.fsync {
        d.fsync = f.policy();
    }
    Ok(Some(d))
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
    let durability = match durability(&args) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
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
        durability,
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
    if let Some(r) = server.recovery() {
        eprintln!(
            "data directory {}: {}",
            args.data_dir
                .as_ref()
                .map_or(String::new(), |d| d.display().to_string()),
            if r.fresh {
                "new".to_string()
            } else {
                format!(
                    "recovered {} checkpoint rows and {} log records up to epoch {} in {:.2} s",
                    r.checkpoint_rows, r.log_records, r.durable_epoch, r.seconds
                )
            }
        );
    }
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
