//! Formats a STAR benchmark result as a table or one JSON object.

use std::fmt::Write;

use phasedb_dist::star::bench::{BenchReport, BenchSettings, FallBackSeen, Reincarnation};
use phasedb_dist::star::stats::TypeCounts;
use phasedb_net::config::NetSettings;
use phasedb_net::{ReplicationSync, StarAlgorithm, StarConfig};
use serde_json::{Value, json};

use super::star_workload::StarWorkload;

/// Where the load comes from, said in every report.
pub const LOAD: &str = "the nodes generate their own transactions (no networked clients, as in \
    the STAR paper's evaluation, §8.1); requests from client endpoints over TCP are served too";

/// Where a Calvin cluster's load comes from.
pub const CALVIN_LOAD: &str = "the sequencer (node 0) draws the transactions of each batch itself     (no networked clients, as in the STAR paper's evaluation, §8.1); Calvin nodes refuse client requests";

/// What the report says about the run besides its measurements.
pub struct RunInfo<'a> {
    /// The workload.
    pub workload: &'a StarWorkload,
    /// The cluster's `[star]` table.
    pub star: &'a StarConfig,
    /// Its transport settings.
    pub net: &'a NetSettings,
    /// The run's windows.
    pub settings: &'a BenchSettings,
    /// Whether the benchmark started the nodes (`--cluster`) or found them (`--connect`).
    pub started: bool,
}

fn abort_rate(t: &TypeCounts) -> f64 {
    let all = t.committed + t.aborted;
    if all == 0 {
        0.0
    } else {
        t.aborted as f64 / all as f64
    }
}

fn workload_json(w: &StarWorkload) -> Value {
    match w {
        StarWorkload::Ycsb(c) => json!({
            "rows_per_partition": c.rows_per_partition,
            "columns": c.columns,
            "column_size": c.column_size,
            "read_ratio": c.read_ratio,
            "ops": phasedb_workloads::ycsb::OPS,
            "fine": c.fine,
        }),
        StarWorkload::Tpcc(c) => json!({
            "warehouses": c.warehouses,
            "mix": c.mix.name(),
            "fine": c.fine,
        }),
    }
}

/// How the run replicates and when it releases results, in words.
fn replication_mode(star: &StarConfig) -> String {
    match (star.algorithm, star.replication) {
        (StarAlgorithm::Star, _) => {
            "asynchronous, results released at the replication fence ending their phase".into()
        }
        (StarAlgorithm::Calvin, _) => format!(
            "of inputs: the sequencer's 10 ms batches go to every replica group ({}), each runs them deterministically",
            calvin_groups(star)
        ),
        (_, ReplicationSync::Async) => format!(
            "asynchronous, results released at a group commit every {} ms",
            star.group_commit_ms
        ),
        (_, ReplicationSync::Sync) => format!(
            "synchronous, write locks held until the backup acknowledged ({} transactions in flight)",
            star.virtual_workers
        ),
    }
}

/// Calvin's replica groups in STAR §8.3's style ("1:3").
fn calvin_groups(star: &StarConfig) -> String {
    match &star.calvin_groups {
        Some(g) => g.iter().map(u32::to_string).collect::<Vec<_>>().join(":"),
        None => "one group".into(),
    }
}

/// The result as one JSON object.
pub fn json(r: &BenchReport, info: &RunInfo) -> Value {
    let secs = r.measured.as_secs_f64().max(1e-9);
    let star = info.star;
    let per_type: serde_json::Map<String, Value> = r
        .window
        .types
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                json!({
                    "committed": t.committed,
                    "committed_cross": t.committed_cross,
                    "aborted": t.aborted,
                    "failed": t.failed,
                    "throughput": t.committed as f64 / secs,
                    "abort_rate": abort_rate(t),
                }),
            )
        })
        .collect();
    let c = &r.coordinator;
    let checks: Vec<Value> = r
        .checks
        .iter()
        .map(|c| match c {
            Ok(()) => json!("ok"),
            Err(e) => json!(e),
        })
        .collect();
    let digests: Vec<Value> = r
        .replicas
        .partitions
        .iter()
        .map(|(p, seen)| {
            json!({
                "partition": p,
                "replicas": seen.iter().map(|(n, d)| json!({"node": n, "digest": format!("{d:016x}")})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut v = json!({
        "workload": info.workload.name(),
        "protocol": star.algorithm.name(),
        "replication_mode": replication_mode(star),
        "load": if star.algorithm == StarAlgorithm::Calvin { CALVIN_LOAD } else { LOAD },
        "throughput": r.throughput(),
        "committed": r.committed(),
        "aborted": r.window.aborted(),
        "abort_rate": r.abort_rate(),
        "measured_s": secs,
        "latency_us": { "p50": r.latency_us(0.5), "p99": r.latency_us(0.99), "p999": r.latency_us(0.999) },
        "per_type": per_type,
        "intervals": {
            "interval_ms": info.settings.interval.as_secs_f64() * 1e3,
            "throughput": r.intervals,
            "min": r.min_interval(),
            "mean": r.throughput(),
            "below_half_mean": r.intervals_below_half_mean(),
        },
        "phases": {
            "per_s": r.phases_per_s(),
            "partitioned_share": r.share(c.partitioned_ns),
            "single_master_share": r.share(c.single_master_ns),
            "fence_share": r.share(c.fence_ns),
        },
        "replication": {
            "bytes_per_txn": r.bytes_per_commit(),
            "records_per_txn": r.records_per_commit(),
            "bytes_sent_per_txn": r.bytes_sent_per_commit(),
            "bytes_partitioned": r.window.replication.bytes_partitioned,
            "bytes_single_master": r.window.replication.bytes_single_master,
            "refused_batches": r.window.replication.refused,
        },
        "cross_partition": { "configured": star.cross_partition, "measured": r.cross_share() },
        "replicas_agree": r.replicas.agree(),
        "replica_problems": r.replicas.problems,
        "digests": digests,
        "consistency": checks,
        "config": {
            "nodes": r.nodes,
            "started_nodes": info.started,
            "partitions": star.partitions,
            "full_replicas": star.full_replicas,
            "replicas_per_partition": star.replicas_per_partition,
            "workers": star.workers,
            "iteration_ms": star.iteration_ms,
            "hybrid_replication": star.hybrid_replication,
            "algorithm": star.algorithm.name(),
            "replication": star.replication.name(),
            "virtual_workers": star.virtual_workers,
            "group_commit_ms": star.group_commit_ms,
            "calvin_groups": star.calvin_groups,
            "cross_partition": star.cross_partition,
            "seed": star.seed,
            "workload_args": star.workload_args,
            "workload": workload_json(info.workload),
            "warmup_s": info.settings.warmup.as_secs_f64(),
            "duration_s": info.settings.duration.as_secs_f64(),
            "delay_us": info.net.delay_us,
            "poll_us": info.net.poll_us,
        },
    });
    // Set apart: one macro call this large reaches serde_json's recursion limit.
    v["remote_rounds_per_commit"] = json!(r.remote_rounds_per_commit());
    v["read_committed"] = json!(r.window.requests.read_committed);
    v["intervals"]["min_over_mean"] = json!(r.min_interval() / r.throughput().max(1e-9));
    v["config"]["placement"] = json!(star.placement);
    v["restarts"] = r.reincarnations.iter().map(restart_json).collect();
    v["fall_back"] = r.fall_back.as_ref().map_or(Value::Null, fall_back_json);
    v
}

/// The fall-back to Dist-OCC once no full replica was left (§7.2): when the benchmark first saw
/// it, from which group on, after how many failures.
fn fall_back_json(f: &FallBackSeen) -> Value {
    json!({
        "seen_s": f.seen.as_secs_f64(),
        "node": f.node,
        "first_group": f.stats.phase,
        "view": f.stats.view,
    })
}

/// The fall-back, for the table.
fn fall_back_line(f: &FallBackSeen) -> String {
    format!(
        "fall-back: no full replica left; the cluster runs Dist-OCC over the partial replicas (§7.2) from group {} on, after {} failure(s), seen on node {} at {:.3} s",
        f.stats.phase,
        f.stats.view,
        f.node,
        f.seen.as_secs_f64()
    )
}

/// A restarted node's way back (§7.2): when its new process answered, when it was a member with
/// its partitions copied, and what the copy moved.
fn restart_json(r: &Reincarnation) -> Value {
    let c = &r.recovery;
    json!({
        "node": r.node,
        "answered_s": r.answered.as_secs_f64(),
        "recovered_s": r.recovered.map(|d| d.as_secs_f64()),
        "rejoined_phase": c.rejoined_phase,
        "copy_s": (c.copied_ns != 0).then(|| c.copied_ns.saturating_sub(c.started_ns) as f64 / 1e9),
        "copied_groups": c.rows,
        "copied_bytes": c.bytes,
        "copied_partitions": c.partitions,
    })
}

/// One line per restarted node, for the table.
fn restart_line(r: &Reincarnation) -> String {
    let c = &r.recovery;
    match r.recovered {
        Some(at) => format!(
            "node {} restarted: answered at {:.3} s, back in the cycle with {} partitions copied ({} groups, {:.1} MiB in {:.3} s) by {:.3} s",
            r.node,
            r.answered.as_secs_f64(),
            c.partitions,
            c.rows,
            c.bytes as f64 / (1 << 20) as f64,
            c.copied_ns.saturating_sub(c.started_ns) as f64 / 1e9,
            at.as_secs_f64()
        ),
        None => format!(
            "node {} restarted: answered at {:.3} s, not recovered when the run ended",
            r.node,
            r.answered.as_secs_f64()
        ),
    }
}

/// The nodes mastering partitions, in words ("nodes 0, 1").
fn primaries(star: &StarConfig) -> String {
    match &star.placement {
        Some(p) => {
            let mut nodes: Vec<u32> = p.iter().filter_map(|h| h.first().copied()).collect();
            nodes.sort_unstable();
            nodes.dedup();
            let list: Vec<String> = nodes.iter().map(u32::to_string).collect();
            format!(
                "node{} {}",
                if nodes.len() == 1 { "" } else { "s" },
                list.join(", ")
            )
        }
        None => "the partial replicas (the layout's default)".into(),
    }
}

/// The result as a table.
pub fn table(r: &BenchReport, info: &RunInfo) -> String {
    let secs = r.measured.as_secs_f64().max(1e-9);
    let star = info.star;
    let mut out = String::new();
    let layout = if star.algorithm == StarAlgorithm::Calvin {
        format!(
            "replica groups {} over {} partitions",
            calvin_groups(star),
            star.partitions
        )
    } else {
        format!(
            "{} full replica{}, {} copies of each of {} partitions, primaries on {}",
            star.full_replicas,
            if star.full_replicas == 1 { "" } else { "s" },
            star.replicas_per_partition,
            star.partitions,
            primaries(star)
        )
    };
    let _ = writeln!(
        out,
        "{} on {} with {} nodes ({layout}), {:.1} s measured after {:.1} s warm-up (seed {})",
        info.workload.name(),
        star.algorithm.name(),
        r.nodes,
        secs,
        info.settings.warmup.as_secs_f64(),
        star.seed
    );
    let load = if star.algorithm == StarAlgorithm::Calvin {
        CALVIN_LOAD
    } else {
        LOAD
    };
    let _ = writeln!(out, "  load: {load}");
    let _ = writeln!(out, "  replication: {}", replication_mode(star));
    let _ = writeln!(
        out,
        "  {} iteration_ms={} cross_partition={} hybrid_replication={} delay_us={}",
        star.workload_args.join(" "),
        star.iteration_ms,
        star.cross_partition,
        star.hybrid_replication,
        info.net.delay_us
    );
    let _ = writeln!(
        out,
        "\n{:<10} {:>11} {:>12} {:>8} {:>8}",
        "type", "committed", "txn/s", "abort%", "cross%"
    );
    let mut line = |t: &TypeCounts| {
        let _ = writeln!(
            out,
            "{:<10} {:>11} {:>12.0} {:>8.2} {:>8.1}",
            t.name,
            t.committed,
            t.committed as f64 / secs,
            abort_rate(t) * 100.0,
            t.committed_cross as f64 / t.committed.max(1) as f64 * 100.0
        );
    };
    let mut total = TypeCounts {
        name: "total".into(),
        ..TypeCounts::default()
    };
    for t in &r.window.types {
        line(t);
        total.committed += t.committed;
        total.committed_cross += t.committed_cross;
        total.aborted += t.aborted;
    }
    if r.window.types.len() > 1 {
        line(&total);
    }
    let c = &r.coordinator;
    let _ = writeln!(
        out,
        "\nthroughput per {:.0} ms: mean {:.0} txn/s, min {:.0} ({:.2} of the mean), {} of {} intervals below half the mean",
        info.settings.interval.as_secs_f64() * 1e3,
        r.throughput(),
        r.min_interval(),
        r.min_interval() / r.throughput().max(1e-9),
        r.intervals_below_half_mean(),
        r.intervals.len()
    );
    let _ = writeln!(
        out,
        "commit latency (generation to the release of its result): p50 {:.2} ms, p99 {:.2} ms, p999 {:.2} ms",
        r.latency_us(0.5) / 1e3,
        r.latency_us(0.99) / 1e3,
        r.latency_us(0.999) / 1e3
    );
    if star.algorithm == StarAlgorithm::Star {
        let _ = writeln!(
            out,
            "phases: {:.0}/s; coordinator's wall time: partitioned {:.1}%, single-master {:.1}%, fences {:.1}%",
            r.phases_per_s(),
            r.share(c.partitioned_ns) * 100.0,
            r.share(c.single_master_ns) * 100.0,
            r.share(c.fence_ns) * 100.0
        );
    } else if star.algorithm == StarAlgorithm::Calvin {
        let _ = writeln!(
            out,
            "batches: {:.0}/s; throughput is the slowest replica group's (groups {})",
            r.phases_per_s(),
            calvin_groups(star)
        );
    } else {
        let _ = writeln!(out, "group commits: {:.0}/s", r.phases_per_s());
    }
    if matches!(
        star.algorithm,
        StarAlgorithm::DistOcc | StarAlgorithm::DistS2pl
    ) {
        let _ = writeln!(
            out,
            "remote rounds (fetches and prepares to other nodes): {:.3} per committed transaction",
            r.remote_rounds_per_commit()
        );
    }
    let _ = writeln!(
        out,
        "replication: {:.1} bytes and {:.2} records per committed transaction ({:.1} bytes sent, every copy counted)",
        r.bytes_per_commit(),
        r.records_per_commit(),
        r.bytes_sent_per_commit()
    );
    let _ = writeln!(
        out,
        "cross-partition share: {:.3} measured ({} configured)",
        r.cross_share(),
        star.cross_partition
    );
    let copies: usize = r.replicas.partitions.iter().map(|p| p.1.len()).sum();
    let _ = writeln!(
        out,
        "replicas agree: {} ({} partitions, {copies} copies compared after quiescing)",
        if r.replicas.agree() { "yes" } else { "no" },
        r.replicas.partitions.len()
    );
    for p in &r.replicas.problems {
        let _ = writeln!(out, "  {p}");
    }
    for restart in &r.reincarnations {
        let _ = writeln!(out, "{}", restart_line(restart));
    }
    if let Some(f) = &r.fall_back {
        let _ = writeln!(out, "{}", fall_back_line(f));
    }
    let failed: Vec<&String> = r.checks.iter().filter_map(|c| c.as_ref().err()).collect();
    let _ = writeln!(
        out,
        "consistency ({} check on every node's partitions): {}",
        info.workload.name(),
        if failed.is_empty() { "ok" } else { "FAILED" }
    );
    for e in failed {
        let _ = writeln!(out, "  {e}");
    }
    out
}
