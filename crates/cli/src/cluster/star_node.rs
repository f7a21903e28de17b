//! `phasedb node` for a cluster file with a `[star]` table: one STAR node
//! (`phasedb_dist::star`), running the workload the table names, until SIGINT or SIGTERM.

use std::fmt::Write;
use std::path::Path;

use phasedb_dist::star::serve::serve;
use phasedb_dist::star::{Layout, StarSettings, StarStats};
use phasedb_net::ClusterConfig;
use phasedb_workloads::tpcc::TpccProcedures;
use phasedb_workloads::ycsb::YcsbProcedures;

use super::star_workload::StarWorkload;

/// Serves node `id` of the STAR cluster `cfg` (read from `path`); returns the exit code: 2 when
/// the table is refused, 1 when the node cannot serve, 0 after a clean stop.
pub fn run(
    path: &Path,
    cfg: &ClusterConfig,
    id: u32,
    listener: Option<std::net::TcpListener>,
    quiet: bool,
    stats_file: Option<&Path>,
) -> i32 {
    let star = cfg.star.as_ref().expect("called for a [star] table");
    if star.algorithm == phasedb_net::StarAlgorithm::Calvin {
        return super::calvin_node::run(path, cfg, id, listener, quiet, stats_file);
    }
    let refuse = |e: String| {
        eprintln!("error: {}: {e}", path.display());
        2
    };
    let workload = match StarWorkload::from_config(star) {
        Ok(w) => w,
        Err(e) => return refuse(e),
    };
    let layout = match Layout::from_cluster(cfg) {
        Ok(l) => l,
        Err(e) => return refuse(e.to_string()),
    };
    let settings = StarSettings {
        seed: star.seed,
        ..StarSettings::from_config(star)
    };
    if !quiet {
        eprintln!(
            "node {id} of a {} cluster of {} ({} replication): {} ({:?}), holding partitions {:?} \
             and mastering {:?} of {}; loading, then serving on {}",
            star.algorithm.name(),
            layout.nodes(),
            star.replication.name(),
            workload.name(),
            workload.args().join(" "),
            layout.held(id),
            layout.mastered(id),
            layout.partitions(),
            cfg.nodes[id as usize].addr
        );
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return 1;
        }
    };
    let result = rt.block_on(async {
        let shutdown = super::node::terminated()?;
        match workload {
            StarWorkload::Ycsb(c) => {
                let w = YcsbProcedures::new(c);
                serve(cfg, id, w, Some(settings), listener, shutdown).await
            }
            StarWorkload::Tpcc(c) => {
                let w = TpccProcedures::new(c);
                serve(cfg, id, w, Some(settings), listener, shutdown).await
            }
        }
    });
    match result {
        Ok(stats) => {
            if let Some(file) = stats_file
                && let Err(e) = std::fs::write(file, to_text(&stats))
            {
                eprintln!("error: cannot write {}: {e}", file.display());
                return 1;
            }
            if !quiet {
                eprintln!(
                    "node {id} stopped cleanly in phase {}: {} committed, {} aborted, {} replication batches applied",
                    stats.phase,
                    stats.committed(),
                    stats.aborted(),
                    stats.replication.batches_applied
                );
            }
            0
        }
        Err(e) => {
            eprintln!(
                "error: node {id} cannot serve on {}: {e}",
                cfg.nodes[id as usize].addr
            );
            1
        }
    }
}

/// A STAR node's final counters as `name value` lines, as a RAMP node writes its own.
pub fn to_text(s: &StarStats) -> String {
    let mut out = String::new();
    let mut line = |name: &str, v: u64| {
        let _ = writeln!(out, "{name} {v}");
    };
    line("node", s.node as u64);
    line("phase", s.phase);
    line("committed", s.committed());
    line("aborted", s.aborted());
    for t in &s.types {
        line(&format!("{}.committed", t.name), t.committed);
        line(&format!("{}.committed_cross", t.name), t.committed_cross);
        line(&format!("{}.aborted", t.name), t.aborted);
        line(&format!("{}.failed", t.name), t.failed);
    }
    let h = s.latency.histogram();
    for (name, q) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)] {
        line(
            &format!("latency_{name}_ns"),
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            },
        );
    }
    let t = &s.times;
    line("phases", t.phases);
    line("partitioned_ns", t.partitioned_ns);
    line("single_master_ns", t.single_master_ns);
    line("fence_ns", t.fence_ns);
    let r = &s.replication;
    line("replication.records", r.records);
    line("replication.bytes_partitioned", r.bytes_partitioned);
    line("replication.bytes_single_master", r.bytes_single_master);
    line("replication.batches_sent", r.batches_sent);
    line("replication.bytes_sent", r.bytes_sent);
    line("replication.batches_applied", r.batches_applied);
    line("replication.records_applied", r.records_applied);
    line("replication.refused", r.refused);
    let q = &s.requests;
    line("requests.received", q.received);
    line("requests.forwarded", q.forwarded);
    line("requests.errors", q.errors);
    line("requests.orphaned", q.orphaned);
    line("requests.queued", q.queued);
    line("requests.generated", q.generated);
    line("requests.discarded", q.discarded);
    out
}
