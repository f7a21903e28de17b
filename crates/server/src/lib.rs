//! `phasedb serve`: the embedded engine behind a TCP server speaking the client protocol of
//! `phasedb-proto` (`docs/wire-protocol.md`).
//!
//! A tokio runtime accepts connections and hands each to an engine thread, which owns a `Worker`
//! and runs a single-threaded runtime of its own: the connection's frames are read, run and
//! answered on that one thread ([`engine`]). Interactive transactions are statement
//! logs validated by replay at commit ([`interactive`]). Shutdown stops accepting, lets every batch
//! already read finish and answers later ones with `ShuttingDown`, then stops the engine threads:
//! a transaction either commits whole or is not run.

mod catalog;
mod conn;
mod durable;
mod engine;
mod exec;
mod interactive;
mod oneshot;
mod procedures;
mod schema;
mod tpcc_terminal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use phasedb_txn::{
    Adaptive, Doppel, NoCc, Occ, SwissTm, TicToc, TwoPlBlocking, TwoPlNoWait, TwoPlWaitDie,
};
use tokio::net::TcpListener;

pub use engine::{Engine, MAX_OPEN_TXNS, MAX_RETRIES};
pub use interactive::Log;

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen (`127.0.0.1:7600` by default: loopback unless told otherwise).
    pub listen: SocketAddr,
    /// The engine's concurrency-control protocol, as `phasedb bench --protocol` names it.
    pub protocol: String,
    /// Engine threads.
    pub threads: usize,
    /// Runtime threads that accept connections (each connection is then served by an engine
    /// thread).
    pub io_threads: usize,
    /// The token clients must present, if any.
    pub token: Option<String>,
    /// The largest frame payload accepted.
    pub max_frame: usize,
    /// The most connections served at once; further ones are closed at once.
    pub max_connections: usize,
    /// Durable operation in a data directory (the protocols whose commit logs, as the engine
    /// answers; see `crate::durable`): commits are acknowledged once durable, and a restart
    /// recovers every acknowledged one.
    pub durability: Option<phasedb_txn::Durability>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:7600".parse().expect("valid address"),
            protocol: "occ".into(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            io_threads: 1,
            token: None,
            max_frame: phasedb_proto::DEFAULT_MAX_FRAME,
            max_connections: 4096,
            durability: None,
        }
    }
}

/// The protocols a server runs (`atomic` runs only increments, so it is not offered).
pub const PROTOCOLS: &[&str] = &[
    "occ",
    "nocc",
    "2pl-nowait",
    "2pl-waitdie",
    "2pl",
    "tictoc",
    "swisstm",
    "adaptive",
    "doppel",
];

/// The engine for protocol `name`, durable in `durability`'s directory if given: the engine
/// decides which protocols can be (`Database::start_durability`); a refusal is the error, and the
/// directory is left as it was.
pub fn engine(
    name: &str,
    threads: usize,
    durability: Option<&phasedb_txn::Durability>,
) -> Result<Arc<dyn Engine>, String> {
    let d = durability;
    Ok(match name {
        "occ" => engine::EngineOf::<Occ>::start(threads, d)?,
        "nocc" => engine::EngineOf::<NoCc>::start(threads, d)?,
        "2pl-nowait" => engine::EngineOf::<TwoPlNoWait>::start(threads, d)?,
        "2pl-waitdie" => engine::EngineOf::<TwoPlWaitDie>::start(threads, d)?,
        "2pl" => engine::EngineOf::<TwoPlBlocking>::start(threads, d)?,
        "tictoc" => engine::EngineOf::<TicToc>::start(threads, d)?,
        "swisstm" => engine::EngineOf::<SwissTm>::start(threads, d)?,
        "adaptive" => engine::EngineOf::<Adaptive>::start(threads, d)?,
        "doppel" => engine::EngineOf::<Doppel>::start(threads, d)?,
        _ => {
            return Err(format!(
                "unknown protocol {name}; one of {}",
                PROTOCOLS.join(", ")
            ));
        }
    })
}

/// What every connection shares.
pub(crate) struct Shared {
    engine: Arc<dyn Engine>,
    token: Option<String>,
    max_frame: usize,
    started: Instant,
    connections: AtomicU64,
    shutting_down: AtomicBool,
    shutdown: tokio::sync::watch::Sender<bool>,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    accept: Option<tokio::task::JoinHandle<tokio::task::JoinSet<()>>>,
}

impl Server {
    /// Binds `config.listen` and starts serving on a runtime of its own.
    pub fn start(config: &ServerConfig) -> Result<Server, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.io_threads.max(1))
            .thread_name("serve-io")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        let listener = runtime
            .block_on(TcpListener::bind(config.listen))
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address: {e}"))?;
        if config.threads == 0 || config.threads > phasedb_txn::MAX_WORKERS / 2 {
            return Err(format!(
                "--threads must be between 1 and {}",
                phasedb_txn::MAX_WORKERS / 2
            ));
        }
        let engine = engine(&config.protocol, config.threads, config.durability.as_ref())?;
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            engine,
            token: config.token.clone(),
            max_frame: config.max_frame,
            started: Instant::now(),
            connections: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            shutdown,
        });
        let accept = runtime.spawn(accept_loop(
            listener,
            shared.clone(),
            config.max_connections,
        ));
        Ok(Server {
            addr,
            shared,
            runtime: Some(runtime),
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the data directory recovered at start, when the server is durable.
    pub fn recovery(&self) -> Option<phasedb_txn::Recovery> {
        self.shared.engine.recovery()
    }

    /// Connections being served.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Stops: no new connections; batches already read finish and their responses are written;
    /// later requests are answered `ShuttingDown`; connections close; then the engine threads stop.
    /// Waits at most `grace` for connections to finish.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop(grace);
    }

    fn stop(&mut self, grace: Duration) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        self.shared.shutting_down.store(true, Ordering::Release);
        let _ = self.shared.shutdown.send(true);
        if let Some(accept) = self.accept.take() {
            runtime.block_on(async {
                if let Ok(mut conns) = accept.await {
                    let _ = tokio::time::timeout(grace, async {
                        while conns.join_next().await.is_some() {}
                    })
                    .await;
                }
            });
        }
        runtime.shutdown_timeout(Duration::from_millis(100));
        self.shared.engine.stop();
    }

    /// Serves until SIGINT or SIGTERM, then shuts down.
    pub fn run_until_signal(mut self) -> Result<(), String> {
        let runtime = self.runtime.as_ref().expect("running");
        runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
            let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            Ok::<_, String>(())
        })?;
        self.stop(Duration::from_secs(10));
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(1));
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    max_connections: usize,
) -> tokio::task::JoinSet<()> {
    let mut conns = tokio::task::JoinSet::new();
    let mut shutdown = shared.shutdown.subscribe();
    let mut next = 0usize;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return conns,
        };
        while conns.try_join_next().is_some() {}
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: back off rather than spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if shared.connections.load(Ordering::Relaxed) as usize >= max_connections {
            drop(stream);
            continue;
        }
        // Moved to the engine thread that serves it, whose runtime takes the socket over.
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        next += 1;
        let shard = next;
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let served = Served {
            shared: shared.clone(),
            _done: done,
        };
        shared.connections.fetch_add(1, Ordering::Relaxed);
        shared.engine.host(
            shard,
            Box::new(move || {
                Box::pin(async move {
                    if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                        conn::serve(stream, served.shared.clone(), shard).await;
                    }
                    drop(served);
                })
            }),
        );
        conns.spawn(async move {
            let _ = finished.await;
        });
    }
}

/// A connection being served: when it ends (or is dropped unserved, the engine having stopped),
/// the count goes down and the accept loop's waiter for it finishes.
struct Served {
    shared: Arc<Shared>,
    _done: tokio::sync::oneshot::Sender<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
