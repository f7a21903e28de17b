//! The cluster benchmark: closed-loop clients against a running cluster, a measured window after
//! warm-up, counters per transaction kind, and an optional Read Atomic check of the whole history.

pub mod endpoint;
pub mod faults;
pub mod launch;
pub mod stats;
pub mod workload;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::ramp::client::pool::ClientPool;
use crate::ramp::client::{ClientSettings, Router};
use crate::ramp::history::Recorder;
use crate::ramp::msg::Algorithm;
use endpoint::{BenchEndpoint, Control, MEASURE, STOP};
use faults::{Faults, Timeline};
use phasedb_check::read_atomic::{RaStats, check_read_atomic};
use phasedb_net::tcp::{TcpOptions, run_blocking};
use phasedb_net::{CLIENT_ADDR_BASE, ClusterConfig};
use stats::Stats;
use workload::{Workload, YcsbRamp};

/// The length of an interval of the throughput timeline.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// How long a server may leave every client without a reply before the run reports it silent
/// (five of the clients' resend timeouts).
pub const SILENCE: Duration = Duration::from_secs(1);

/// Most clients one benchmark process runs.
pub const MAX_CLIENTS: usize = 1 << 14;

/// Endpoint threads a run uses unless told: one per core (at most one per client), so one thread
/// builds requests while another handles replies and the servers are never all left waiting on a
/// single client loop.
pub fn default_threads(clients: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(clients.max(1))
}

/// One benchmark run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Concurrent closed-loop clients.
    pub clients: usize,
    /// Endpoint threads the clients are spread over (each has its own connections).
    pub threads: usize,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Seed of the transaction generators.
    pub seed: u64,
    /// The workload.
    pub workload: YcsbRamp,
    /// RAMP-H Bloom filter bits.
    pub bloom_bits: usize,
    /// RAMP-H Bloom filter hashes.
    pub bloom_hashes: u8,
    /// Record every transaction and check Read Atomic isolation afterwards.
    pub verify: bool,
    /// Share of RAMP writes that skip COMMIT, left to cooperative termination.
    pub skip_commit: f64,
    /// Run endpoint thread `t` on core `t` modulo the cores ([`crate::host::pin_to_core`]).
    pub pin: bool,
}

impl BenchConfig {
    /// Refuses configurations that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(format!("--clients must be between 1 and {MAX_CLIENTS}"));
        }
        if self.threads == 0 || self.threads > 64 || self.threads > self.clients {
            return Err("--threads must be between 1 and 64 and at most --clients".into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        if !(64..=1 << 16).contains(&self.bloom_bits) || !(1..=16).contains(&self.bloom_hashes) {
            return Err("--bloom-bits must be 64..=65536 and --bloom-hashes 1..=16".into());
        }
        self.workload.validate()
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct BenchReport {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Servers in the cluster.
    pub servers: usize,
    /// Length of the measured window.
    pub measured: Duration,
    /// Counters per kind.
    pub stats: Stats,
    /// The Read Atomic verdict when the run was verified: transactions checked, or the anomalies.
    pub verified: Option<Result<RaStats, Vec<String>>>,
    /// Transactions finished per second in each [`INTERVAL`] from the start of the load (warm-up
    /// included), so a stall shows.
    pub timeline: Timeline,
    /// Requests the clients resent because no answer came within their resend timeout.
    pub resends: u64,
    /// Servers that stopped answering for [`SILENCE`] (and answered again), as the clients saw it.
    pub silences: Faults,
}

impl BenchReport {
    /// Committed transactions per second.
    pub fn throughput(&self) -> f64 {
        self.stats.total().committed as f64 / self.measured.as_secs_f64().max(1e-9)
    }
}

/// Runs `bench` against the running cluster `cluster`, calling `progress(elapsed, finished)` about
/// ten times a second.
pub fn run(
    cluster: &ClusterConfig,
    bench: &BenchConfig,
    mut progress: impl FnMut(Duration, u64),
) -> Result<BenchReport, String> {
    bench.validate()?;
    let workload = Workload::new(bench.workload.clone());
    let router = Router::new(cluster);
    let servers = cluster
        .nodes
        .iter()
        .map(|n| n.id as usize + 1)
        .max()
        .unwrap_or(0);
    let control = Arc::new(Control::new(servers));
    let settings = ClientSettings {
        bloom_bits: bench.bloom_bits,
        bloom_hashes: bench.bloom_hashes,
        skip_commit: bench.skip_commit,
        ..ClientSettings::new(bench.algorithm)
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let pid = std::process::id();
    let per_thread = bench.clients.div_ceil(bench.threads);
    let mut threads = Vec::new();
    for t in 0..bench.threads {
        let first = t * per_thread;
        let n = per_thread.min(bench.clients - first.min(bench.clients));
        if n == 0 {
            continue;
        }
        let first_id = ((pid & 0xff) << 14) | first as u32;
        let pool = ClientPool::new(n, first_id, settings, &router);
        let gens = (first..first + n)
            .map(|c| workload.generator(bench.seed, c as u64))
            .collect();
        let mut ep = BenchEndpoint::new(pool, gens, control.clone(), bench.verify);
        let me = CLIENT_ADDR_BASE + ((pid & 0xfff) << 7) + t as u32;
        let mut opts = TcpOptions::new(me, cluster.peer_addrs());
        opts.delay = cluster.delay();
        opts.poll = cluster.poll();
        opts.tick = Duration::from_millis(5);
        let rx = stop_rx.clone();
        let pin = bench.pin;
        threads.push(std::thread::spawn(move || {
            if pin {
                crate::host::pin_to_core(t)?;
            }
            run_blocking(&mut ep, opts, rx)
                .map(|()| ep)
                .map_err(|e| e.to_string())
        }));
    }
    let start = Instant::now();
    let mut measure_start: Option<Instant> = None;
    let mut stopped_early = false;
    let mut samples = vec![(Duration::ZERO, 0u64)];
    let mut silences = Faults::new(None);
    let mut silent = vec![false; servers];
    let mut next_tick = INTERVAL;
    loop {
        let elapsed = start.elapsed();
        let finished = control.finished.load(Ordering::Relaxed);
        if elapsed >= next_tick {
            samples.push((elapsed, finished));
            next_tick +=
                INTERVAL * (1 + (elapsed - next_tick).as_nanos() / INTERVAL.as_nanos()) as u32;
            watch_servers(&control, start, &mut silent, &mut silences);
        }
        progress(elapsed, finished);
        if measure_start.is_none() && elapsed >= bench.warmup {
            control.phase.store(MEASURE, Ordering::Relaxed);
            measure_start = Some(Instant::now());
        }
        if measure_start.is_some_and(|m| m.elapsed() >= bench.duration) {
            break;
        }
        if threads.iter().any(|t| t.is_finished()) {
            stopped_early = true;
            break;
        }
        let next = match measure_start {
            None => bench.warmup.saturating_sub(elapsed),
            Some(m) => bench.duration.saturating_sub(m.elapsed()),
        };
        let to_tick = next_tick.saturating_sub(start.elapsed());
        std::thread::sleep(next.min(to_tick).min(INTERVAL));
    }
    control.phase.store(STOP, Ordering::Relaxed);
    let measured = measure_start.map_or(Duration::ZERO, |s| s.elapsed());
    samples.push((start.elapsed(), control.finished.load(Ordering::Relaxed)));
    // Clients waiting on a silent server never finish: do not wait long for them.
    let drain = if silent.iter().any(|&s| s) {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    };
    let drain_deadline = Instant::now() + drain;
    while threads.iter().any(|t| !t.is_finished()) && Instant::now() < drain_deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = stop_tx.send(true);
    let mut stats = Stats::default();
    let mut resends = 0;
    let mut recorder = bench.verify.then(Recorder::new);
    for t in threads {
        let ep = t
            .join()
            .map_err(|_| "a client thread panicked".to_string())??;
        stats.merge(&ep.stats);
        resends += ep.resends();
        if let (Some(all), Some(r)) = (&mut recorder, ep.recorder) {
            all.merge(r);
        }
    }
    if stopped_early {
        return Err("the clients stopped early (is the cluster running?)".into());
    }
    let verified = recorder.map(|r| {
        // Endpoints drain before stopping, so a write still unfinished was cut off by the drain
        // deadline; it is reported as not committed, which the checker may flag if someone read it.
        let history = r.finish(|_| None);
        check_read_atomic(&history, 10).map_err(|v| v.iter().map(|a| a.to_string()).collect())
    });
    Ok(BenchReport {
        algorithm: bench.algorithm,
        servers: cluster.nodes.len(),
        measured,
        stats,
        verified,
        timeline: Timeline::from_samples(INTERVAL, &samples),
        resends,
        silences,
    })
}

/// Notes servers that have not answered for [`SILENCE`] while a client waited on them past its
/// resend timeout (the time noted is when it was noticed; the text says when the last reply came),
/// and silent servers that answer again.
fn watch_servers(control: &Control, start: Instant, silent: &mut [bool], faults: &mut Faults) {
    let now = start.elapsed();
    let since_epoch = control.epoch.elapsed().as_millis() as u64;
    let started_ms = since_epoch.saturating_sub(now.as_millis() as u64);
    for (server, was_silent) in silent.iter_mut().enumerate() {
        // Before its first reply a server is timed from the start of the load.
        let last = control.last_reply(server).unwrap_or(started_ms.max(1));
        let quiet = Duration::from_millis(since_epoch.saturating_sub(last));
        // Silent only while clients wait on it: a live server whose clients all wait on a dead
        // one gets no requests, so no replies either.
        let awaited = control.last_waited(server).is_some_and(|w| w > last);
        if quiet >= SILENCE && awaited && !*was_silent {
            *was_silent = true;
            let last_s = last.saturating_sub(started_ms) as f64 / 1000.0;
            faults.silent(
                now,
                server,
                format!(
                    "no reply to any client since {last_s:.3} s ({:.1} s)",
                    quiet.as_secs_f64()
                ),
            );
        } else if quiet < SILENCE && *was_silent {
            *was_silent = false;
            faults.answering(now, server);
        }
    }
}
