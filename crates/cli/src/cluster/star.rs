//! `phasedb bench ycsb|tpcc --algorithm star|pb-occ [--replication async|sync]`: a STAR cluster (or
//! one of a baseline of STAR's paper, on the same nodes) of `phasedb node` processes started on
//! 127.0.0.1 (`--cluster N`) or already running (`--connect FILE`), the nodes generating their own
//! load as in the paper's evaluation, watched over TCP (`phasedb_dist::star::bench`). PB-OCC runs
//! on two nodes, both full replicas, node 0 the primary.
//!
//! Defaults, scaled to a 2-core machine: 1 full replica (node 0, the coordinator) and the other
//! nodes partial, 2 copies of each partition, one partition per node, mastered by that node
//! (`--placement spread`, the experiments' placement; the paper has as many
//! partitions as worker threads, §8.1, and a node here runs one), YCSB with 200K rows per
//! partition (§8.1.1), a 10 ms iteration (§4.3) and 10% cross-partition transactions (the issue's
//! target point).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use phasedb_dist::ramp::bench::launch::ProcessCluster;
use phasedb_dist::star::bench::{BenchSettings, Stage};
use phasedb_dist::star::{Layout, spread_placement};
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{ClusterConfig, ReplicationSync, StarAlgorithm, StarConfig};

use super::bench::ClusterArgs;
use super::failures::FailureReport;
use super::star_history;
use super::star_report::{RunInfo, json, table};
use super::star_workload::StarWorkload;
use crate::bench::{Common, Granularity, TpccArgs, YcsbArgs};
use phasedb_dist::ramp::bench::faults::Faults;

/// The default share of cross-partition transactions.
pub const DEFAULT_CROSS_PARTITION: f64 = 0.1;

/// The workload flags the command line gave.
pub enum WorkloadFlags<'a> {
    /// `phasedb bench ycsb ...`.
    Ycsb(&'a YcsbArgs),
    /// `phasedb bench tpcc ...`.
    Tpcc(&'a TpccArgs),
}

impl WorkloadFlags<'_> {
    fn name(&self) -> &'static str {
        match self {
            WorkloadFlags::Ycsb(_) => "ycsb",
            WorkloadFlags::Tpcc(_) => "tpcc",
        }
    }

    /// Whether any workload flag was given.
    fn given(&self) -> bool {
        match self {
            WorkloadFlags::Ycsb(y) => {
                y.variant.is_some()
                    || y.rows.is_some()
                    || y.ops.is_some()
                    || y.read_ratio.is_some()
                    || y.theta.is_some()
                    || y.columns.is_some()
                    || y.column_size.is_some()
                    || y.granularity != Granularity::Coarse
            }
            WorkloadFlags::Tpcc(t) => {
                t.warehouses.is_some()
                    || t.mix.is_some()
                    || t.remote_item_ratio.is_some()
                    || t.remote_payment_ratio.is_some()
                    || t.granularity != Granularity::Coarse
            }
        }
    }
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// The algorithm and replication mode the flags ask for, or why they cannot run.
fn algorithm(args: &ClusterArgs) -> Result<(StarAlgorithm, ReplicationSync), String> {
    let algorithm = match args.algorithm.as_str() {
        "star" => StarAlgorithm::Star,
        "pb-occ" => StarAlgorithm::PbOcc,
        "dist-occ" => StarAlgorithm::DistOcc,
        "dist-s2pl" => StarAlgorithm::DistS2pl,
        "calvin" => StarAlgorithm::Calvin,
        other => {
            return Err(format!(
                "--algorithm {other} is not one of STAR's framework (star, pb-occ, dist-occ, dist-s2pl)"
            ));
        }
    };
    let replication = match args.replication.as_deref() {
        None | Some("async") => ReplicationSync::Async,
        Some(_) => ReplicationSync::Sync,
    };
    if algorithm != StarAlgorithm::Calvin && args.calvin_groups.is_some() {
        return Err("--calvin-groups applies to --algorithm calvin only".into());
    }
    if algorithm == StarAlgorithm::Calvin && args.replication.is_some() {
        return Err(
            "--replication does not apply to Calvin: it replicates its inputs (the sequencer's batches)"
                .into(),
        );
    }
    if algorithm == StarAlgorithm::Star && args.replication.is_some() {
        return Err(
            "--replication applies to STAR's baselines (pb-occ, dist-occ, dist-s2pl): STAR replicates \
             asynchronously and releases results at its replication fences"
                .into(),
        );
    }
    if algorithm != StarAlgorithm::Star {
        let star_only = [
            (args.iteration_ms.is_some(), "--iteration-ms"),
            (args.no_hybrid, "--no-hybrid"),
        ];
        if let Some((_, flag)) = star_only.iter().find(|f| f.0) {
            return Err(format!(
                "{flag} applies to --algorithm star only (the baselines replicate values and group-commit every 10 ms)"
            ));
        }
    }
    Ok((algorithm, replication))
}

/// The `[star]` table of a `--cluster n` run.
fn star_table(
    args: &ClusterArgs,
    c: &Common,
    flags: &WorkloadFlags,
    n: u32,
) -> Result<StarConfig, String> {
    let partitions = match flags {
        WorkloadFlags::Ycsb(_) => args.partitions.unwrap_or(n),
        WorkloadFlags::Tpcc(t) => match (t.warehouses, args.partitions) {
            (Some(w), Some(p)) if w != p => {
                return Err(format!(
                    "--warehouses {w} and --partitions {p} differ: STAR's TPC-C has one partition per warehouse"
                ));
            }
            (Some(w), _) => w,
            (None, p) => p.unwrap_or(n),
        },
    };
    let (algorithm, replication) = algorithm(args)?;
    if algorithm == StarAlgorithm::PbOcc && n != 2 {
        return Err(format!(
            "--algorithm pb-occ runs on 2 nodes, a primary and its backup (STAR §8.1.2), not {n}"
        ));
    }
    // PB-OCC: both nodes hold everything; node 0 is the primary.
    let full = if algorithm == StarAlgorithm::PbOcc {
        n
    } else {
        1
    };
    let mut star = StarConfig {
        algorithm,
        replication,
        full_replicas: args.full_replicas.unwrap_or(full),
        replicas_per_partition: args.replicas.unwrap_or(2.min(n)),
        iteration_ms: args.iteration_ms.unwrap_or(10.0),
        hybrid_replication: !args.no_hybrid,
        cross_partition: args.cross_partition.unwrap_or(DEFAULT_CROSS_PARTITION),
        seed: c.seed,
        ..StarConfig::new(partitions)
    };
    if algorithm == StarAlgorithm::Calvin {
        let sizes = match &args.calvin_groups {
            Some(text) => phasedb_dist::calvin::Groups::parse(text)?,
            None => vec![n],
        };
        if sizes.iter().sum::<u32>() != n {
            return Err(format!(
                "--calvin-groups {} needs {} nodes, not --cluster {n}",
                args.calvin_groups.as_deref().unwrap_or_default(),
                sizes.iter().sum::<u32>()
            ));
        }
        phasedb_dist::calvin::Groups::new(&sizes, partitions).map_err(|e| e.to_string())?;
        star.calvin_groups = Some(sizes);
    }
    star.placement = placement(args.placement.as_deref(), &star, n)?;
    // The layout's rules (who holds what) as the nodes will check them, before any starts.
    Layout::new(n, &star).map_err(|e| e.to_string())?;
    let workload = match flags {
        WorkloadFlags::Ycsb(y) => StarWorkload::ycsb(y, partitions)?,
        WorkloadFlags::Tpcc(t) => StarWorkload::tpcc(t, partitions)?,
    };
    star.workload = Some(workload.name().into());
    star.workload_args = workload.args();
    Ok(star)
}

/// The explicit placement of a `--cluster n` run: primaries spread over every node
/// ([`spread_placement`], the experiments' placement) unless `--placement partial` asks for the
/// layout's own (primaries on the partial replicas only). Calvin places data by replica groups.
fn placement(
    choice: Option<&str>,
    star: &StarConfig,
    n: u32,
) -> Result<Option<Vec<Vec<u32>>>, String> {
    match (star.algorithm, choice) {
        (StarAlgorithm::Calvin, Some(_)) => {
            Err("--placement does not apply to Calvin: its replica groups place the data".into())
        }
        (StarAlgorithm::Calvin, None) | (_, Some("partial")) => Ok(None),
        // The table's own checks first, for their messages.
        _ if star.validate(n).is_err() => Ok(None),
        _ => spread_placement(
            n,
            star.full_replicas,
            star.replicas_per_partition,
            star.partitions,
        )
        .map(Some)
        .map_err(|e| e.to_string()),
    }
}

/// Runs the STAR benchmark; returns the process exit code (1 when replicas disagree or a
/// consistency check fails, 2 on bad flags).
pub fn run(args: &ClusterArgs, c: &Common, flags: WorkloadFlags) -> i32 {
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
    if c.verify && args.algorithm == super::bench::CALVIN {
        return fail(
            "--verify is not built for --algorithm calvin (its replicas are compared after every run)",
        );
    }
    if c.threads.is_some() {
        return fail("--threads does not apply to --algorithm star: each node runs one worker");
    }
    if let Some(x) = args.cross_partition
        && !(0.0..=1.0).contains(&x)
    {
        return fail("--cross-partition must be between 0 and 1");
    }
    let server = ServerSettings::default();
    let net = NetSettings {
        delay_us: args.delay_us,
        poll_us: args.poll_us,
    };
    let restarts = args.algorithm == super::bench::STAR;
    let plan = match args.fault_plan(args.cluster.unwrap_or(0), restarts) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    // --verify: where the nodes append their histories (a directory of this run's own for a
    // cluster it starts, removed once checked unless the check fails).
    let mut history_dir = None;
    let (config, mut processes) = match (&args.connect, args.cluster) {
        (Some(path), _) => {
            let cfg = match ClusterConfig::load(path) {
                Ok(cfg) => cfg,
                Err(e) => return fail(e),
            };
            let Some(star) = &cfg.star else {
                return fail(format!(
                    "{} has no [star] table: it describes a RAMP cluster",
                    path.display()
                ));
            };
            if let Some(flag) = args.star_flag() {
                return fail(format!(
                    "{flag} does not apply with --connect: the cluster file's [star] table sets the layout"
                ));
            }
            if flags.given() {
                return fail(
                    "with --connect the workload comes from the cluster file's [star] table: drop the workload flags",
                );
            }
            if c.verify && star.history.is_none() {
                return fail(format!(
                    "--verify with --connect reads the nodes' history files: {}'s [star] table names none (history = \"/dir/node-{{node}}.jsonl\")",
                    path.display()
                ));
            }
            if star.algorithm.name() != args.algorithm {
                return fail(format!(
                    "the cluster runs {}, not {}",
                    star.algorithm.name(),
                    args.algorithm
                ));
            }
            if star.workload.as_deref() != Some(flags.name()) {
                return fail(format!(
                    "the cluster runs {}, not {}",
                    star.workload.as_deref().unwrap_or("no workload"),
                    flags.name()
                ));
            }
            (cfg, None)
        }
        (None, Some(n)) => {
            if n == 0 || n > 64 {
                return fail("--cluster must be between 1 and 64 nodes");
            }
            let mut star = match star_table(args, c, &flags, n as u32) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            if c.verify {
                let (dir, file) = star_history::history_dir();
                star.history = Some(file);
                history_dir = Some(dir);
            }
            let binary = match crate::this_program() {
                Ok(b) => b,
                Err(e) => return fail(format!("cannot find the phasedb binary: {e}")),
            };
            match ProcessCluster::start_star(&binary, n, star, server, net, !args.no_pin) {
                Ok(p) => (p.config.clone(), Some(p)),
                Err(e) => {
                    if let Some(dir) = &history_dir {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    return fail(e);
                }
            }
        }
        (None, None) => return fail("--cluster N or --connect FILE is required"),
    };
    let star = config.star.clone().expect("a STAR cluster");
    let workload = match StarWorkload::from_config(&star) {
        Ok(w) => w,
        Err(e) => return fail(e),
    };
    let settings = BenchSettings {
        warmup: Duration::from_secs_f64(c.warmup),
        duration: Duration::from_secs_f64(c.duration),
        ..BenchSettings::default()
    };
    let bar = progress_bar(
        &settings,
        workload.name(),
        star.algorithm.name(),
        config.nodes.len(),
    );
    let calvin = star.algorithm == StarAlgorithm::Calvin;
    let mut faults = Faults::new(plan);
    let watch = |p: &phasedb_dist::star::bench::Progress| {
        if p.stage != Stage::Loading {
            faults.tick(processes.as_mut(), p.elapsed);
        } else if let Some(exit) = processes.as_mut().and_then(ProcessCluster::exited) {
            return Err(exit);
        }
        // Only STAR fails over (§7); the others stop at a node's death.
        if !restarts && let Some(e) = faults.events.first() {
            return Err(format!(
                "node {} is gone at {:.3} s and {} has no fail-over: the run stops",
                e.node,
                e.at.as_secs_f64(),
                star.algorithm.name()
            ));
        }
        let stage = match p.stage {
            Stage::Loading => "loading",
            Stage::Warmup => "warm-up",
            Stage::Measuring => "measuring",
            Stage::Quiescing => "quiescing",
        };
        bar.set_position(p.elapsed.as_millis() as u64);
        bar.set_message(format!("{stage}, {:.0} txn/s", p.rate));
        Ok(())
    };
    let result = if calvin {
        phasedb_dist::calvin::bench::run(&config, &settings, watch)
    } else {
        phasedb_dist::star::bench::run(&config, &settings, watch)
    };
    bar.finish_and_clear();
    let history_files = c
        .verify
        .then(|| star_history::history_files(&star, config.nodes.len()))
        .flatten();
    let clean = processes.map(|p| {
        let killed = p.killed();
        (
            p.config.nodes.len() - killed,
            p.stop(Duration::from_secs(10)),
        )
    });
    let mut report = match result {
        Ok(r) => r,
        Err(e) => {
            for line in faults.lines() {
                eprintln!("  {line}");
            }
            eprintln!("error: {e}");
            if let Some(dir) = &history_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            return 1;
        }
    };
    // Read once the nodes stopped (each wrote what it had left); with --connect, after the
    // quiesce, by which every phase with load was fenced and written.
    let history = history_files
        .as_deref()
        .map(|files| star_history::HistoryVerdict::check(files, report.acknowledged));
    for e in std::mem::take(&mut report.silences.events) {
        faults.note(e);
    }
    let failures = FailureReport {
        faults: &faults,
        timeline: &report.timeline,
        retries: vec![
            ("retried", report.window.requests.retried),
            ("request_errors", report.window.requests.errors),
            ("orphaned_forwards", report.window.requests.orphaned),
            ("discarded", report.window.requests.discarded),
        ],
    };
    let info = RunInfo {
        workload: &workload,
        star: &star,
        net: &config.net,
        settings: &settings,
        started: args.cluster.is_some() && args.connect.is_none(),
    };
    if c.json {
        let mut out = json(&report, &info);
        out["failures"] = failures.json();
        if let Some(h) = &history {
            out["history"] = h.json();
        }
        println!("{out}");
    } else {
        print!("{}", table(&report, &info));
        print!("{}", failures.table());
        if let Some(h) = &history {
            println!("\n{}", h.line());
        }
    }
    if let Some((n, clean)) = clean
        && clean < n
    {
        eprintln!(
            "warning: {} of {n} nodes did not shut down cleanly",
            n - clean
        );
    }
    let mut code = 0;
    if !report.replicas.agree() {
        for p in &report.replicas.problems {
            eprintln!("error: replicas disagree: {p}");
        }
        code = 1;
    }
    for e in report.checks.iter().filter_map(|c| c.as_ref().err()) {
        eprintln!("error: consistency check failed: {e}");
        code = 1;
    }
    if failures.fails() {
        code = 1;
    }
    if let Some(h) = &history
        && h.fails(history_dir.as_deref())
    {
        code = 1;
    } else if let Some(dir) = &history_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    code
}

fn progress_bar(
    settings: &BenchSettings,
    workload: &str,
    algorithm: &str,
    nodes: usize,
) -> ProgressBar {
    let total_ms = (settings.warmup + settings.duration).as_millis() as u64;
    let bar = ProgressBar::new(total_ms.max(1));
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {elapsed}/{duration} {msg}")
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{workload} on {algorithm} with {nodes} nodes"));
    bar.set_message("loading");
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(algorithm: StarAlgorithm, choice: Option<&str>, n: u32, partitions: u32) -> Layout {
        let mut star = StarConfig {
            algorithm,
            ..StarConfig::new(partitions)
        };
        star.placement = placement(choice, &star, n).unwrap();
        Layout::new(n, &star).unwrap()
    }

    /// With every primary on one node nothing is remote: Dist-OCC's "cross-partition"
    /// transactions would all run on that node.
    #[test]
    fn the_default_placement_spreads_primaries_over_every_node() {
        for algorithm in [
            StarAlgorithm::Star,
            StarAlgorithm::DistOcc,
            StarAlgorithm::DistS2pl,
        ] {
            for n in 2..=4 {
                let l = layout(algorithm, None, n, n);
                for node in 0..n {
                    assert_eq!(l.mastered(node), vec![node], "{algorithm:?}, {n} nodes");
                    assert_eq!(l.replicas(node).len(), 2);
                    assert!(l.holds(0, node), "the full replica holds partition {node}");
                }
            }
        }
        let partial = layout(StarAlgorithm::DistOcc, Some("partial"), 2, 2);
        assert!(partial.mastered(0).is_empty());
        assert_eq!(partial.mastered(1), vec![0, 1]);
        let calvin = StarConfig {
            algorithm: StarAlgorithm::Calvin,
            ..StarConfig::new(2)
        };
        assert!(placement(Some("spread"), &calvin, 2).is_err());
    }
}
