//! `phasedb bench`: one run of one workload on one protocol.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use phasedb_txn::{
    Adaptive, Atomic, Config, Doppel, NoCc, Occ, Protocol, SwissTm, TicToc, TwoPlBlocking,
    TwoPlNoWait, TwoPlWaitDie,
};
use phasedb_workloads::append::{Append, AppendConfig};
use phasedb_workloads::bank::{Bank, BankConfig};
use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};
use phasedb_workloads::like::{Like, LikeConfig};
use phasedb_workloads::ycsb::{Variant, Ycsb, YcsbConfig};
use phasedb_workloads::{BenchOptions, BenchResult, Workload, run_bench};

use crate::report;

/// Options every workload takes.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Concurrency-control protocol.
    #[arg(long, short, value_enum, default_value_t = ProtocolName::Occ, global = true)]
    pub protocol: ProtocolName,
    /// Worker threads (default: the number of cores); with --cluster or --connect FILE, the client
    /// endpoint threads the clients are spread over (default: the number of cores, at most
    /// --clients); with --connect HOST:PORT, the client connections (default: the number of cores).
    #[arg(long, short, global = true)]
    pub threads: Option<usize>,
    /// Seconds of the measured window.
    #[arg(long, short, default_value_t = 5.0, global = true)]
    pub duration: f64,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 1.0, global = true)]
    pub warmup: f64,
    /// Seed of the transaction generators.
    #[arg(long, default_value_t = 1, global = true)]
    pub seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Record the history and check it is serializable after the run (slow; keep runs short). On
    /// a STAR cluster (star, pb-occ, dist-*), every node appends its history to a file as it
    /// goes, a node killed with --kill-node included, and the merged history must also hold every
    /// acknowledged transaction; on RAMP, a Read Atomic check.
    #[arg(long, global = true)]
    pub verify: bool,
    /// Record the history and write it to FILE after the run, for Elle or another checker (slow;
    /// keep runs short: a second holds some hundred thousand transactions).
    #[arg(long, global = true, value_name = "FILE")]
    pub history: Option<std::path::PathBuf>,
    /// Format of --history: Elle's list-append EDN (from the values read, for append; from the
    /// engine's version chains otherwise), Elle's rw-register EDN, or phasedb's own complete JSON
    /// (docs/history.md). Default: elle-list-append.
    #[arg(long, value_enum, global = true)]
    pub history_format: Option<crate::history::HistoryFormat>,
    /// Milliseconds of a split phase under doppel (its phase cycle).
    #[arg(long, default_value_t = 20.0, global = true)]
    pub phase_length: f64,
    /// Run durably in DIR (SiloR: per-worker value logs, epoch group commit, checkpoints): a new
    /// directory gets the loaded tables as its first checkpoint, one holding a database of the
    /// same workload and settings is recovered and run on (ycsb, tpcc, bank). Every protocol whose
    /// commits log (all but atomic and nocc; docs/durability.md). If logging fails (a full
    /// disk), the run stops at the first commit refused and exits with status 1.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// With --data-dir: fsync after every group commit (group, the default) or never (none:
    /// logging without the disk's latency).
    #[arg(long, value_enum, global = true)]
    pub fsync: Option<FsyncArg>,
    /// With --data-dir: logger threads, each writing a log file of its own (default 1).
    #[arg(long, global = true)]
    pub loggers: Option<usize>,
    /// With --data-dir: seconds between background checkpoints during the run (each one also
    /// deletes the logs it makes unneeded); default: none during the run.
    #[arg(long, global = true, value_name = "SECS")]
    pub checkpoint_interval: Option<f64>,
    /// With --data-dir: threads writing a checkpoint, sharing the tables' parts (default 1, so
    /// that on few cores a checkpoint takes one core from the workers, not all of them).
    #[arg(long, global = true, value_name = "N")]
    pub checkpoint_threads: Option<usize>,
    /// With --data-dir: count a transaction only once it is durable, and report commit-to-durable
    /// latency percentiles (in milliseconds and epochs).
    #[arg(long, global = true)]
    pub durable_results: bool,
    /// With --durable-results: print the transactions acknowledged durable so far, per type, to
    /// stderr every 100 ms (`durable <seconds> <type>=<count> ...`; for crash tests).
    #[arg(long, global = true)]
    pub durable_progress: bool,
}

/// `--fsync` policies.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncArg {
    /// fsync after every group commit.
    Group,
    /// Never fsync.
    None,
}

impl FsyncArg {
    /// The engine's policy for this flag value.
    pub fn policy(self) -> phasedb_txn::FsyncPolicy {
        match self {
            FsyncArg::Group => phasedb_txn::FsyncPolicy::Group,
            FsyncArg::None => phasedb_txn::FsyncPolicy::None,
        }
    }
}

/// The protocols the engine runs.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolName {
    /// Silo's optimistic concurrency control.
    Occ,
    /// No concurrency control (not serializable; the overhead baseline).
    Nocc,
    /// Two-phase locking that aborts at once on a held lock.
    #[value(name = "2pl-nowait")]
    TwoPlNoWait,
    /// Two-phase locking with wait-die deadlock prevention.
    #[value(name = "2pl-waitdie")]
    TwoPlWaitDie,
    /// Blocking two-phase locking with timeout-based deadlock resolution.
    #[value(name = "2pl")]
    TwoPl,
    /// TicToc: OCC with data-driven logical timestamps.
    Tictoc,
    /// SwissTM: eager write locks, optimistic reads, contention manager favouring older transactions.
    Swisstm,
    /// Adaptive reader-writer locks that turn pessimistic on contended records.
    Adaptive,
    /// Atomic instructions and no other concurrency control (increment workloads only).
    Atomic,
    /// Doppel: phase reconciliation; contended records split into per-core slices.
    Doppel,
}

/// Metadata granularity: one column group per row, or several.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Granularity {
    #[default]
    Coarse,
    Fine,
    /// Chosen and changed by the engine while it runs (ycsb and tpcc, protocols without phases).
    Auto,
}

/// `phasedb bench` arguments.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    workload: WorkloadArgs,
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    cluster: crate::cluster::bench::ClusterArgs,
    #[command(flatten)]
    remote: crate::remote_bench::RemoteArgs,
}

#[derive(Subcommand, Debug)]
enum WorkloadArgs {
    /// YCSB: STAR/DBx1000 (`--variant star`), timestamp-granularity (`granularity`) or RAMP (`ramp`).
    Ycsb(YcsbArgs),
    /// Bank transfers with audits of the total balance.
    Bank(BankArgs),
    /// TPC-C: all five transactions, or the NewOrder/Payment(/OrderStatus) mixes of the papers.
    Tpcc(TpccArgs),
    /// INCR1 (Doppel): each transaction increments one key; `--hot` of them the same key.
    Incr1(Incr1Args),
    /// INCRZ (Doppel): each transaction increments one zipfian-chosen key.
    Incrz(IncrzArgs),
    /// LIKE (Doppel): users like zipfian-chosen pages; reads read a page count and a user row.
    Like(LikeArgs),
    /// RUBiS auctions (Doppel): the bidding mix (`--mix b`) or half bids on zipfian items (`c`).
    Rubis(RubisArgs),
    /// List-append (Jepsen's Elle): appends to and reads of bounded lists on a few contended keys,
    /// recording what every read returned; `--adds` mixes in splittable counter adds (Doppel).
    Append(AppendArgs),
    /// Counters whose conflicting columns change halfway through the run (issue 39): readers and
    /// writers of a few hot rows, with the abort rate per interval.
    Shift(crate::bench_shift::ShiftArgs),
    /// The P-DUR paper's micro-benchmark (types I, II, III) on P-DUR or DUR replicas
    /// (`--cluster N --algorithm pdur|dur`) or the embedded store (`--algorithm embedded-store`).
    PdurMicro(crate::cluster::pdur::PdurMicroArgs),
    /// The P-DUR paper's Twitter-like workload (timeline, post, follow) on P-DUR or DUR replicas.
    Twitter(crate::cluster::pdur::TwitterArgs),
}

#[derive(Args, Debug)]
struct AppendArgs {
    /// Keys of the contended set (each moves on to a fresh key when its list fills).
    #[arg(long, default_value_t = 8)]
    keys: u64,
    /// Micro-operations per transaction, on distinct keys.
    #[arg(long, default_value_t = 4)]
    ops: usize,
    /// Share of micro-operations that read a list.
    #[arg(long, default_value_t = 0.5)]
    read_ratio: f64,
    /// Share of micro-operations that add 1 to the key's counter, a splittable operation that
    /// Doppel runs on per-core slices once it splits the counter; the rest append.
    #[arg(long, default_value_t = 0.0)]
    adds: f64,
    /// Keys of the set that start absent (the first append inserts them).
    #[arg(long, default_value_t = 2)]
    absent_keys: u64,
    /// Elements a list holds before its key is retired.
    #[arg(long, default_value_t = 16)]
    capacity: usize,
}

#[derive(Args, Debug)]
struct Incr1Args {
    /// Number of keys.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Share of transactions that increment the single hot key.
    #[arg(long, default_value_t = 0.0)]
    hot: f64,
    /// Seconds after which the hot key changes identity (default: never).
    #[arg(long)]
    move_every: Option<f64>,
}

#[derive(Args, Debug)]
struct LikeArgs {
    /// Number of users.
    #[arg(long, default_value_t = 1_000_000)]
    users: u64,
    /// Number of pages.
    #[arg(long, default_value_t = 1_000_000)]
    pages: u64,
    /// Zipfian skew of page choice (0 = uniform).
    #[arg(long, default_value_t = 1.4)]
    alpha: f64,
    /// Share of write (like) transactions.
    #[arg(long, default_value_t = 0.5)]
    write_ratio: f64,
}

#[derive(Args, Debug)]
struct IncrzArgs {
    /// Number of keys.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Zipfian skew of key choice.
    #[arg(long, default_value_t = 1.4)]
    alpha: f64,
}

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct YcsbArgs {
    /// Which of the seeds' YCSB shapes (default: star).
    #[arg(long, value_parser = ["star", "granularity", "ramp"])]
    pub(crate) variant: Option<String>,
    /// Rows in the table (per partition under --algorithm star).
    #[arg(long)]
    pub(crate) rows: Option<u64>,
    /// Operations per transaction.
    #[arg(long)]
    pub(crate) ops: Option<usize>,
    /// Share of reads (star, granularity) or of read-only transactions (ramp).
    #[arg(long)]
    pub(crate) read_ratio: Option<f64>,
    /// Zipfian skew of key choice (0 = uniform).
    #[arg(long)]
    pub(crate) theta: Option<f64>,
    /// Columns per row.
    #[arg(long)]
    pub(crate) columns: Option<usize>,
    /// Bytes per column.
    #[arg(long)]
    pub(crate) column_size: Option<usize>,
    /// One column group per row (coarse) or even/odd column groups (fine).
    #[arg(long, value_enum, default_value_t = Granularity::Coarse)]
    pub(crate) granularity: Granularity,
}

#[derive(Args, Debug)]
struct BankArgs {
    /// Number of accounts.
    #[arg(long, default_value_t = 1000)]
    accounts: u64,
    /// Share of transactions that audit the total.
    #[arg(long, default_value_t = 0.01)]
    audit_ratio: f64,
    /// Keep the balance in its own column group.
    #[arg(long, value_enum, default_value_t = Granularity::Coarse)]
    granularity: Granularity,
}

#[derive(Args, Debug, Clone, Default)]
pub(crate) struct TpccArgs {
    /// Number of warehouses (default 1; under --algorithm star, one per partition).
    #[arg(long)]
    pub(crate) warehouses: Option<u32>,
    /// Transaction mix: the specification's (standard, the default), NewOrder/Payment 50/50
    /// (no-p), or NewOrder/Payment/OrderStatus 45:43:4 (no-p-os); under --algorithm star,
    /// new-order, payment or no-p (the default).
    #[arg(long, value_parser = ["standard", "no-p", "no-p-os", "new-order", "payment"])]
    pub(crate) mix: Option<String>,
    /// NewOrder: share of order lines supplied by another warehouse (default: the spec's 0.01).
    #[arg(long)]
    pub(crate) remote_item_ratio: Option<f64>,
    /// Payment: share of payments for a customer of another warehouse (default: the spec's 0.15).
    #[arg(long)]
    pub(crate) remote_payment_ratio: Option<f64>,
    /// One column group per row (coarse), or rarely and often updated fields apart (fine).
    #[arg(long, value_enum, default_value_t = Granularity::Coarse)]
    pub(crate) granularity: Granularity,
}

#[derive(Args, Debug)]
struct RubisArgs {
    /// Transaction mix: RUBiS's bidding mix, items uniform (b), or 50% StoreBid on zipfian items (c).
    #[arg(long, value_parser = ["b", "c"], default_value = "b")]
    mix: String,
    /// Mix c: zipfian skew of the items bid on (0 = uniform).
    #[arg(long, default_value_t = 1.8)]
    alpha: f64,
    /// Users at load (the paper: 1000000).
    #[arg(long, default_value_t = 100_000)]
    users: u64,
    /// Items on auction at load (the paper: 33000).
    #[arg(long, default_value_t = 33_000)]
    items: u64,
    /// Categories.
    #[arg(long, default_value_t = 20)]
    categories: u64,
    /// Regions.
    #[arg(long, default_value_t = 62)]
    regions: u64,
    /// Bids loaded on every item.
    #[arg(long, default_value_t = 5)]
    bids_per_item: u32,
    /// Comments loaded on every item.
    #[arg(long, default_value_t = 1)]
    comments_per_item: u32,
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// Runs `phasedb bench`; returns the process exit code.
pub fn run(args: BenchArgs) -> i32 {
    let c = &args.common;
    if c.history_format.is_some() && c.history.is_none() {
        return fail("--history-format needs --history FILE");
    }
    let pdur = match &args.workload {
        WorkloadArgs::PdurMicro(m) => Some((
            crate::cluster::pdur::PdurWorkload::Micro {
                ty: m.ty.clone(),
                items: m.items,
            },
            m.clients_per_partition,
            m.local_clients,
        )),
        WorkloadArgs::Twitter(t) => Some((
            crate::cluster::pdur::PdurWorkload::Twitter { users: t.users },
            t.clients_per_partition,
            t.local_clients,
        )),
        _ => None,
    };
    if let Some((workload, clients, local)) = pdur {
        return crate::cluster::pdur::run(&args.cluster, c, workload, clients, local);
    }
    if crate::cluster::pdur::PDUR_FAMILY.contains(&args.cluster.algorithm.as_str()) {
        return fail(format!(
            "--algorithm {} runs the pdur-micro and twitter workloads only",
            args.cluster.algorithm
        ));
    }
    let distributed =
        args.cluster.is_star() || args.cluster.cluster.is_some() || args.cluster.connect.is_some();
    if distributed && c.history.is_some() {
        return fail("--history records embedded runs only");
    }
    if let Some(addr) = (args.cluster.connect.as_deref()).and_then(crate::remote_bench::is_server) {
        let WorkloadArgs::Ycsb(y) = &args.workload else {
            return fail("--connect HOST:PORT runs the ycsb workload only");
        };
        return crate::remote_bench::run(addr, y, c, &args.remote);
    }
    if distributed && c.data_dir.is_some() {
        return fail("--data-dir makes embedded runs durable only");
    }
    let durability = match durability(c) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    if args.cluster.is_star() {
        let workload = match &args.workload {
            WorkloadArgs::Ycsb(y) => crate::cluster::star::WorkloadFlags::Ycsb(y),
            WorkloadArgs::Tpcc(t) => crate::cluster::star::WorkloadFlags::Tpcc(t),
            _ => {
                return fail(format!(
                    "--algorithm {} runs the ycsb and tpcc workloads only",
                    args.cluster.algorithm
                ));
            }
        };
        return crate::cluster::star::run(&args.cluster, c, workload);
    }
    if let Some(flag) = args.cluster.star_flag() {
        let to = if flag == "--replication" {
            "STAR's baselines (--algorithm pb-occ)"
        } else {
            "--algorithm star"
        };
        return fail(format!("{flag} applies to {to} only"));
    }
    if args.cluster.cluster.is_some() || args.cluster.connect.is_some() {
        let WorkloadArgs::Ycsb(y) = &args.workload else {
            return fail("--cluster and --connect run the ycsb workload only");
        };
        let shape = crate::cluster::bench::Shape {
            rows: y.rows,
            ops: y.ops,
            read_ratio: y.read_ratio,
            theta: y.theta,
            value_size: y.column_size,
        };
        return crate::cluster::bench::run(&args.cluster, c, shape);
    }
    if let Some(path) = &c.history
        && let Err(e) = std::fs::File::create(path)
    {
        // Found out before the run rather than after it.
        return fail(format!(
            "cannot write the history to {}: {e}",
            path.display()
        ));
    }
    let threads = c
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 0 || threads > phasedb_txn::MAX_WORKERS {
        return fail(format!(
            "--threads must be between 1 and {}",
            phasedb_txn::MAX_WORKERS
        ));
    }
    for (name, v) in [("--duration", c.duration), ("--warmup", c.warmup)] {
        if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
            return fail(format!(
                "{name} must be a number of seconds between 0 and 86400"
            ));
        }
    }
    if c.duration <= 0.0 {
        return fail("--duration must be positive");
    }
    if !(c.phase_length >= 0.1 && c.phase_length <= 10_000.0) {
        return fail("--phase-length must be between 0.1 and 10000 milliseconds");
    }
    let opts = BenchOptions {
        threads,
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.duration),
        seed: c.seed,
        durable_results: c.durable_results,
        durable_progress: c.durable_progress,
        config: Config {
            record_history: c.verify || c.history.is_some(),
            phase_length: Duration::from_secs_f64(c.phase_length / 1000.0),
            durability,
            ..Config::default()
        },
    };
    let increments = matches!(
        args.workload,
        WorkloadArgs::Incr1(_) | WorkloadArgs::Incrz(_)
    );
    if c.protocol == ProtocolName::Atomic && !increments {
        return fail("the atomic protocol runs only the increment workloads (incr1, incrz)");
    }
    match &args.workload {
        WorkloadArgs::Ycsb(y) => {
            let variant = Variant::parse(y.variant.as_deref().unwrap_or("star"))
                .expect("clap checked the variant");
            let mut cfg = YcsbConfig::defaults(variant);
            cfg.rows = y.rows.unwrap_or(cfg.rows);
            cfg.ops = y.ops.unwrap_or(cfg.ops);
            cfg.read_ratio = y.read_ratio.unwrap_or(cfg.read_ratio);
            cfg.theta = y.theta.unwrap_or(cfg.theta);
            cfg.columns = y.columns.unwrap_or(cfg.columns);
            cfg.column_size = y.column_size.unwrap_or(cfg.column_size);
            cfg.fine = y.granularity == Granularity::Fine;
            if let Err(e) = cfg.validate() {
                return fail(e);
            }
            if y.granularity == Granularity::Auto {
                return dispatch(&mut Ycsb::new(cfg).auto_groups(), c, &opts);
            }
            dispatch(&mut Ycsb::new(cfg), c, &opts)
        }
        WorkloadArgs::Bank(b) => {
            if b.accounts < 2 {
                return fail("--accounts must be at least 2");
            }
            if !(0.0..=1.0).contains(&b.audit_ratio) {
                return fail("--audit-ratio must be between 0 and 1");
            }
            if b.granularity == Granularity::Auto {
                return fail("--granularity auto is supported by ycsb and tpcc");
            }
            let cfg = BankConfig {
                accounts: b.accounts,
                audit_ratio: b.audit_ratio,
                fine: b.granularity == Granularity::Fine,
                ..BankConfig::default()
            };
            dispatch(&mut Bank::new(cfg), c, &opts)
        }
        WorkloadArgs::Incr1(a) => {
            let choice = match a.move_every {
                None => KeyChoice::Hot(a.hot),
                Some(s) if s > 0.0 && s < 86_400.0 => KeyChoice::Moving {
                    hot: a.hot,
                    every: Duration::from_secs_f64(s),
                },
                Some(_) => return fail("--move-every must be a number of seconds above 0"),
            };
            incr(
                IncrConfig {
                    keys: a.keys,
                    choice,
                },
                c,
                &opts,
            )
        }
        WorkloadArgs::Like(a) => {
            let cfg = LikeConfig {
                users: a.users,
                pages: a.pages,
                alpha: a.alpha,
                write_ratio: a.write_ratio,
            };
            if let Err(e) = cfg.validate() {
                return fail(e);
            }
            dispatch(&mut Like::new(cfg), c, &opts)
        }
        WorkloadArgs::Incrz(a) => incr(
            IncrConfig {
                keys: a.keys,
                choice: KeyChoice::Zipf(a.alpha),
            },
            c,
            &opts,
        ),
        WorkloadArgs::Tpcc(t) => {
            use phasedb_workloads::tpcc::{Tpcc, TpccConfig, TpccMix};
            let mix = t.mix.as_deref().unwrap_or("standard");
            let Some(mix) = TpccMix::parse(mix) else {
                return fail(format!(
                    "--mix {mix} runs on a STAR cluster only (--cluster N --algorithm star); \
                     the embedded engine runs standard, no-p or no-p-os"
                ));
            };
            let defaults = TpccConfig::default();
            let cfg = TpccConfig {
                warehouses: t.warehouses.unwrap_or(1),
                mix,
                remote_item_ratio: t.remote_item_ratio.unwrap_or(defaults.remote_item_ratio),
                remote_payment_ratio: t
                    .remote_payment_ratio
                    .unwrap_or(defaults.remote_payment_ratio),
                fine: t.granularity == Granularity::Fine,
            };
            if let Err(e) = cfg.validate() {
                return fail(e);
            }
            if t.granularity == Granularity::Auto {
                return dispatch(&mut Tpcc::new(cfg).auto_groups(), c, &opts);
            }
            dispatch(&mut Tpcc::new(cfg), c, &opts)
        }
        WorkloadArgs::Shift(a) => match a.workload() {
            Ok(mut w) => {
                let code = dispatch(&mut w, c, &opts);
                print!("{}", a.over_time(&w));
                code
            }
            Err(e) => fail(e),
        },
        WorkloadArgs::PdurMicro(_) | WorkloadArgs::Twitter(_) => {
            unreachable!("the P-DUR benchmarks returned above")
        }
        WorkloadArgs::Append(a) => {
            let cfg = AppendConfig {
                keys: a.keys,
                ops: a.ops,
                read_ratio: a.read_ratio,
                adds: a.adds,
                absent_keys: a.absent_keys,
                capacity: a.capacity,
            };
            if let Err(e) = cfg.validate() {
                return fail(e);
            }
            dispatch(&mut Append::new(cfg), c, &opts)
        }
        WorkloadArgs::Rubis(a) => {
            use phasedb_workloads::rubis::{Rubis, RubisConfig, RubisMix};
            let cfg = RubisConfig {
                users: a.users,
                items: a.items,
                categories: a.categories,
                regions: a.regions,
                bids_per_item: a.bids_per_item,
                comments_per_item: a.comments_per_item,
                mix: RubisMix::parse(&a.mix).expect("clap checked the mix"),
                alpha: a.alpha,
            };
            if let Err(e) = cfg.validate() {
                return fail(e);
            }
            dispatch(&mut Rubis::new(cfg), c, &opts)
        }
    }
}

/// The durability settings of the flags, or why they do not fit together.
fn durability(c: &Common) -> Result<Option<phasedb_txn::Durability>, String> {
    let Some(dir) = &c.data_dir else {
        for (set, flag) in [
            (c.fsync.is_some(), "--fsync"),
            (c.loggers.is_some(), "--loggers"),
            (c.checkpoint_interval.is_some(), "--checkpoint-interval"),
            (c.checkpoint_threads.is_some(), "--checkpoint-threads"),
            (c.durable_results, "--durable-results"),
        ] {
            if set {
                return Err(format!("{flag} needs --data-dir DIR"));
            }
        }
        if c.durable_progress {
            return Err("--durable-progress needs --durable-results".into());
        }
        return Ok(None);
    };
    if c.durable_progress && !c.durable_results {
        return Err("--durable-progress needs --durable-results".into());
    }
    if c.verify || c.history.is_some() {
        return Err("--data-dir does not record histories (--verify, --history)".into());
    }
    let loggers = c.loggers.unwrap_or(1);
    if !(1..=64).contains(&loggers) {
        return Err("--loggers must be between 1 and 64".into());
    }
    let mut d = phasedb_txn::Durability::new(dir);
    d.loggers = loggers;
    if let Some(n) = c.checkpoint_threads {
        if !(1..=64).contains(&n) {
            return Err("--checkpoint-threads must be between 1 and 64".into());
        }
        d.checkpoint_threads = n;
    }
    if let Some(secs) = c.checkpoint_interval {
        if !(secs.is_finite() && secs > 0.0) {
            return Err("--checkpoint-interval must be a positive number of seconds".into());
        }
        d.checkpoint_interval = Some(std::time::Duration::from_secs_f64(secs));
    }
    d.fsync = c.fsync.unwrap_or(FsyncArg::Group).policy();
    Ok(Some(d))
}

fn incr(cfg: IncrConfig, c: &Common, opts: &BenchOptions) -> i32 {
    if let Err(e) = cfg.validate() {
        return fail(e);
    }
    dispatch(&mut Incr::new(cfg), c, opts)
}

fn dispatch<W: Workload>(workload: &mut W, c: &Common, opts: &BenchOptions) -> i32 {
    let result = run_named(c.protocol, workload, opts);
    report_result(workload, result, c, opts)
}

/// Runs `workload` on the protocol named `protocol`, drawing a progress bar on stderr.
pub fn run_named<W: Workload>(
    protocol: ProtocolName,
    workload: &mut W,
    opts: &BenchOptions,
) -> BenchResult {
    run_named_observed(protocol, workload, opts, &mut |_, _| {})
}

/// As [`run_named`], also calling `observe(elapsed, committed)` at every progress tick (a few
/// dozen times a second), for throughput over time.
pub fn run_named_observed<W: Workload>(
    protocol: ProtocolName,
    workload: &mut W,
    opts: &BenchOptions,
    observe: &mut dyn FnMut(Duration, u64),
) -> BenchResult {
    match protocol {
        ProtocolName::Occ => with_progress::<Occ, W>(workload, opts, observe),
        ProtocolName::Nocc => with_progress::<NoCc, W>(workload, opts, observe),
        ProtocolName::TwoPlNoWait => with_progress::<TwoPlNoWait, W>(workload, opts, observe),
        ProtocolName::TwoPlWaitDie => with_progress::<TwoPlWaitDie, W>(workload, opts, observe),
        ProtocolName::TwoPl => with_progress::<TwoPlBlocking, W>(workload, opts, observe),
        ProtocolName::Tictoc => with_progress::<TicToc, W>(workload, opts, observe),
        ProtocolName::Swisstm => with_progress::<SwissTm, W>(workload, opts, observe),
        ProtocolName::Adaptive => with_progress::<Adaptive, W>(workload, opts, observe),
        ProtocolName::Atomic => with_progress::<Atomic, W>(workload, opts, observe),
        ProtocolName::Doppel => with_progress::<Doppel, W>(workload, opts, observe),
    }
}

fn with_progress<P: Protocol, W: Workload>(
    workload: &mut W,
    opts: &BenchOptions,
    observe: &mut dyn FnMut(Duration, u64),
) -> BenchResult {
    let total_ms = (opts.warmup + opts.duration).as_millis() as u64;
    let bar = ProgressBar::new(total_ms.max(1));
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {elapsed}/{duration} {msg}")
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{} on {}", workload.name(), P::NAME));
    bar.set_message("loading");
    let warmup = opts.warmup;
    let mut last = (Duration::ZERO, 0u64);
    let result = run_bench::<P, W>(workload, opts, |elapsed, committed| {
        observe(elapsed, committed);
        bar.set_position(elapsed.as_millis() as u64);
        let rate = (committed - last.1) as f64 / (elapsed - last.0).as_secs_f64().max(1e-9);
        let phase = if elapsed < warmup {
            "warm-up"
        } else {
            "measuring"
        };
        bar.set_message(format!("{phase}, {rate:.0} txn/s"));
        last = (elapsed, committed);
    });
    bar.finish_and_clear();
    result
}

fn report_result<W: Workload>(
    workload: &W,
    result: BenchResult,
    c: &Common,
    opts: &BenchOptions,
) -> i32 {
    if !result.started {
        let why = result.check.err().unwrap_or_default();
        eprintln!("error: the run did not start: {why}");
        return 2;
    }
    let settings = workload.settings();
    let observed = workload.take_observed();
    let verified = c.verify.then(|| {
        let h = &result.history;
        let engine = phasedb_check::check_serializable(h).map_err(|a| a.to_string());
        let verdict = match (engine, observed.as_ref().map(|o| o.check())) {
            (Ok(_), None | Some(Ok(_))) => Ok(()),
            (Err(e), None) => Err(e),
            (engine, Some(values)) => Err(format!(
                "engine history: {}; values read: {}",
                engine.map_or_else(|e| e, |_| "serializable".into()),
                values.map_or_else(|v| v.to_string(), |_| "serializable".into())
            )),
        };
        (h.len(), verdict)
    });
    let mut code = 0;
    if let Some(path) = &c.history {
        let format = c.history_format.unwrap_or_default();
        match crate::history::write(path, format, workload.name(), &result, observed.as_ref()) {
            Ok(()) => eprintln!("history written to {}", path.display()),
            Err(e) => {
                eprintln!("error: cannot write the history to {}: {e}", path.display());
                // No partial or empty file that a checker could take for a history.
                let _ = std::fs::remove_file(path);
                code = 1;
            }
        }
    }
    if c.json {
        println!(
            "{}",
            report::json(workload.name(), &result, &settings, opts, verified.as_ref())
        );
    } else {
        print!(
            "{}",
            report::table(workload.name(), &result, &settings, opts, verified.as_ref())
        );
    }
    if let Some(why) = &result.logging_failure {
        // The transactions acknowledged before it are durable; the workload's check needs
        // transactions, which logging refuses now, so it did not run.
        eprintln!("error: the run stopped, logging failed and commits are refused: {why}");
        code = 1;
    } else if let Err(e) = &result.check {
        eprintln!("error: consistency check failed: {e}");
        code = 1;
    }
    if let Some((_, Err(e))) = &verified {
        eprintln!("error: history is not serializable: {e}");
        code = 1;
    }
    code
}
