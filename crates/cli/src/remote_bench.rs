//! `phasedb bench ycsb --connect HOST:PORT`: the YCSB workload run through the Rust client
//! against `phasedb serve`, so served and embedded figures come from one command.
//!
//! Each client thread holds one connection and keeps `--pipeline` one-shot transactions in flight:
//! it sends them in one write and reads their responses. A transaction is the embedded `star`
//! variant's: `--ops` distinct keys, each read whole, or read and then rewritten whole. The table
//! `usertable` is created and loaded through the client unless the server has one of the same
//! shape.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Args;
use phasedb_client::{Client, ClientError, ColumnDef, ColumnKind, Op, Request, TableDef, Value};
use phasedb_keys::Zipf;
use phasedb_proto::wire;
use phasedb_workloads::ycsb::{Variant, YcsbConfig};
use rand::rngs::SmallRng;
use rand::{Rng, RngExt, SeedableRng};

use crate::bench::{Common, YcsbArgs};

/// Flags of a run against a server.
#[derive(Args, Debug, Clone)]
pub struct RemoteArgs {
    /// With --connect HOST:PORT: one-shot transactions each connection keeps in flight.
    #[arg(long, global = true, default_value_t = 32)]
    pub pipeline: usize,
    /// With --connect HOST:PORT: a file holding the server's token.
    #[arg(long, global = true, value_name = "F")]
    pub token_file: Option<std::path::PathBuf>,
}

/// Whether `--connect VALUE` names a server (HOST:PORT, not an existing file).
pub fn is_server(connect: &std::path::Path) -> Option<SocketAddr> {
    use std::net::ToSocketAddrs;
    if connect.exists() {
        return None;
    }
    connect.to_str()?.to_socket_addrs().ok()?.next()
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// Runs the benchmark; returns the exit code.
pub fn run(addr: SocketAddr, y: &YcsbArgs, c: &Common, r: &RemoteArgs) -> i32 {
    if y.variant.as_deref().is_some_and(|v| v != "star") {
        return fail("--connect HOST:PORT runs the star variant of ycsb");
    }
    let mut cfg = YcsbConfig::defaults(Variant::Star);
    cfg.rows = y.rows.unwrap_or(cfg.rows);
    cfg.ops = y.ops.unwrap_or(cfg.ops);
    cfg.read_ratio = y.read_ratio.unwrap_or(cfg.read_ratio);
    cfg.theta = y.theta.unwrap_or(cfg.theta);
    cfg.columns = y.columns.unwrap_or(cfg.columns);
    cfg.column_size = y.column_size.unwrap_or(cfg.column_size);
    if let Err(e) = cfg.validate() {
        return fail(e);
    }
    if r.pipeline == 0 || r.pipeline > 4096 {
        return fail("--pipeline must be between 1 and 4096");
    }
    let token = match &r.token_file {
        None => None,
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => Some(t.trim().to_string()),
            Err(e) => return fail(format!("cannot read {}: {e}", p.display())),
        },
    };
    let threads = c
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 0 || threads > 4096 {
        return fail("--threads (connections) must be between 1 and 4096");
    }
    let m = match measure(
        addr,
        &cfg,
        threads,
        r.pipeline,
        Duration::from_secs_f64(c.warmup),
        Duration::from_secs_f64(c.duration),
        c.seed,
        token.as_deref(),
    ) {
        Ok(m) => m,
        Err((code, e)) => {
            eprintln!("error: {e}");
            return code;
        }
    };
    let (protocol, total) = (m.protocol, m.counts);
    let secs = c.duration;
    let tput = total.committed as f64 / secs;
    let ops = tput * cfg.ops as f64;
    let attempts = (total.committed + total.aborted).max(1) as f64;
    let pct = |q: f64| {
        total
            .batch_us
            .get(((total.batch_us.len() as f64 * q) as usize).min(total.batch_us.len().max(1) - 1))
            .copied()
            .unwrap_or(0)
    };
    if c.json {
        println!(
            "{{\"workload\":\"ycsb\",\"mode\":\"served\",\"server\":\"{addr}\",\"protocol\":\"{protocol}\",\
             \"throughput\":{tput:.1},\"ops_per_s\":{ops:.1},\"committed\":{},\"aborted\":{},\
             \"abort_rate\":{:.5},\"connections\":{threads},\"pipeline\":{},\
             \"batch_latency_us\":{{\"p50\":{},\"p99\":{}}},\"config\":{{\"rows\":{},\"ops\":{},\
             \"read_ratio\":{},\"theta\":{},\"columns\":{},\"column_size\":{},\"duration\":{},\"warmup\":{}}}}}",
            total.committed,
            total.aborted,
            total.aborted as f64 / attempts,
            r.pipeline,
            pct(0.5),
            pct(0.99),
            cfg.rows,
            cfg.ops,
            cfg.read_ratio,
            cfg.theta,
            cfg.columns,
            cfg.column_size,
            c.duration,
            c.warmup
        );
    } else {
        println!(
            "ycsb served by {addr} ({protocol}), {threads} connections x {} in flight",
            r.pipeline
        );
        println!(
            "committed {} txn in {secs:.1} s: {tput:.0} txn/s, {ops:.0} ops/s, abort rate {:.4}",
            total.committed,
            total.aborted as f64 / attempts
        );
        println!(
            "pipelined batch round trip: p50 {} us, p99 {} us",
            pct(0.5),
            pct(0.99)
        );
    }
    0
}

/// What one run against a server measured.
pub struct Measured {
    /// The server's protocol, as its welcome said.
    pub protocol: String,
    counts: Counts,
}

impl Measured {
    /// Committed transactions per second of the measured window.
    pub fn throughput(&self, window: Duration) -> f64 {
        self.counts.committed as f64 / window.as_secs_f64().max(1e-9)
    }

    /// Transactions committed in the measured window.
    pub fn committed(&self) -> u64 {
        self.counts.committed
    }

    /// Aborted attempts over all attempts.
    pub fn abort_rate(&self) -> f64 {
        let attempts = self.counts.committed + self.counts.aborted;
        self.counts.aborted as f64 / attempts.max(1) as f64
    }
}

/// Runs YCSB `cfg` on `threads` connections to `addr`, each keeping `pipeline` one-shots in
/// flight, and counts the batches that ran wholly inside the `duration` after `warmup`. An error
/// carries the exit code: 2 when nothing ran (no connection, no table), 1 when a connection
/// failed mid-run.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    addr: SocketAddr,
    cfg: &YcsbConfig,
    threads: usize,
    pipeline: usize,
    warmup: Duration,
    duration: Duration,
    seed: u64,
    token: Option<&str>,
) -> Result<Measured, (i32, String)> {
    let mut client =
        Client::connect(addr, token).map_err(|e| (2, format!("cannot connect to {addr}: {e}")))?;
    let protocol = client.welcome().protocol.clone();
    let table =
        prepare(&mut client, cfg).map_err(|e| (2, format!("cannot set up usertable: {e}")))?;
    let start = Instant::now() + Duration::from_millis(50);
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let outcomes: Vec<Result<Counts, ClientError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                s.spawn(move || {
                    let mut conn = Client::connect(addr, token)?;
                    drive(
                        &mut conn,
                        cfg,
                        table,
                        pipeline,
                        seed ^ i as u64,
                        measure_from,
                        end,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let mut counts = Counts::default();
    for o in outcomes {
        counts.add(o.map_err(|e| (1, format!("a client connection failed: {e}")))?);
    }
    counts.batch_us.sort_unstable();
    Ok(Measured { protocol, counts })
}

/// Creates and loads `usertable`, or reuses one of the same shape; returns its id.
fn prepare(client: &mut Client, cfg: &YcsbConfig) -> Result<u32, ClientError> {
    let columns: Vec<ColumnDef> = (0..cfg.columns)
        .map(|c| ColumnDef {
            name: format!("field{c}"),
            kind: ColumnKind::Fixed(cfg.column_size as u16),
            group: 0,
        })
        .collect();
    if let Ok(t) = client.describe_table("usertable") {
        let same = t.def.columns.len() == columns.len()
            && t.def.columns.iter().all(|c| c.kind == columns[0].kind);
        if same {
            eprintln!("using the server's usertable (id {})", t.id);
            return Ok(t.id);
        }
        client.drop_table("usertable")?;
    }
    let t = client
        .create_table(TableDef {
            name: "usertable".into(),
            columns,
            capacity: cfg.rows,
            ordered: false,
        })?
        .id;
    let mut rng = SmallRng::seed_from_u64(0x10ad);
    let mut batch = Vec::new();
    let per = 500u64;
    let mut key = 0;
    while key < cfg.rows {
        batch.clear();
        for _ in 0..16 {
            let ops: Vec<Op> = (key..(key + per).min(cfg.rows))
                .map(|k| Op::Put {
                    table: t,
                    key: k,
                    values: row(&mut rng, cfg),
                })
                .collect();
            key = (key + per).min(cfg.rows);
            batch.push(Request::Execute(ops));
            if key == cfg.rows {
                break;
            }
        }
        for resp in client.pipeline(&batch)? {
            phasedb_client::check(resp)?;
        }
    }
    Ok(t)
}

fn row(rng: &mut SmallRng, cfg: &YcsbConfig) -> Vec<(u16, Value)> {
    (0..cfg.columns as u16)
        .map(|c| {
            let mut v = vec![0u8; cfg.column_size];
            rng.fill_bytes(&mut v);
            (c, Value::Bytes(v))
        })
        .collect()
}

#[derive(Default)]
struct Counts {
    committed: u64,
    aborted: u64,
    batch_us: Vec<u32>,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.committed += o.committed;
        self.aborted += o.aborted;
        self.batch_us.extend(o.batch_us);
    }
}

/// One connection's closed loop: batches of `pipeline` transactions until `end`, counted from
/// `measure_from`. The requests are encoded straight into one buffer and the responses read where
/// they arrive ([`phasedb_proto::wire`]), so the client allocates nothing per transaction.
fn drive(
    conn: &mut Client,
    cfg: &YcsbConfig,
    table: u32,
    pipeline: usize,
    seed: u64,
    measure_from: Instant,
    end: Instant,
) -> Result<Counts, ClientError> {
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let zipf = (cfg.theta > 0.0).then(|| Zipf::new(cfg.rows, cfg.theta));
    let mut counts = Counts::default();
    let mut frames = Vec::with_capacity(pipeline * (64 + cfg.ops * cfg.columns * cfg.column_size));
    let mut keys = Vec::with_capacity(cfg.ops);
    let mut writes = Vec::with_capacity(cfg.ops);
    let mut value = vec![0u8; cfg.column_size];
    loop {
        let now = Instant::now();
        if now >= end {
            return Ok(counts);
        }
        frames.clear();
        let first = conn.reserve_ids(pipeline);
        for id in first..first + pipeline as u64 {
            keys.clear();
            writes.clear();
            while keys.len() < cfg.ops {
                let key = match &zipf {
                    Some(z) => z.sample(&mut rng),
                    None => rng.random_range(0..cfg.rows),
                };
                if keys.contains(&key) {
                    continue;
                }
                keys.push(key);
                writes.push(!rng.random_bool(cfg.read_ratio));
            }
            let n = keys.len() + writes.iter().filter(|&&w| w).count();
            let start = wire::begin_execute(&mut frames, id, n);
            for (&key, &write) in keys.iter().zip(&writes) {
                wire::put_get(&mut frames, table, key, &[]);
                if write {
                    rng.fill_bytes(&mut value);
                    let v = value.as_slice();
                    wire::put_write(
                        &mut frames,
                        wire::op::UPDATE,
                        table,
                        key,
                        (0..cfg.columns as u16).map(|c| (c, v)),
                    );
                }
            }
            wire::end_frame(&mut frames, start);
        }
        let sent = Instant::now();
        let (mut committed, mut aborted) = (0, 0);
        conn.pipeline_raw(&frames, first, pipeline, |payload| {
            match wire::peek(payload).map(|p| p.1) {
                Some(wire::RESPONSE_RESULTS) => committed += 1,
                Some(wire::RESPONSE_ABORTED) => aborted += 1,
                _ => {
                    let (_, resp) = phasedb_proto::decode_response(payload)
                        .map_err(|e| ClientError::Protocol(e.to_string()))?;
                    phasedb_client::check(resp)?;
                }
            }
            Ok(())
        })?;
        let done = Instant::now();
        if sent < measure_from || done > end {
            continue;
        }
        counts
            .batch_us
            .push(done.duration_since(sent).as_micros().min(u32::MAX as u128) as u32);
        counts.committed += committed;
        counts.aborted += aborted;
    }
}
