//! `phasedb node` for a cluster file whose `[star]` table says `algorithm = "calvin"`: one Calvin
//! node (`phasedb_dist::calvin`) running the table's workload until SIGINT or SIGTERM. TPC-C's
//! transactions lock records (their read/write sets, `TpccProcedures::lock_set`); YCSB's lock
//! whole partitions. Both name the rows their requests read (`read_rows`), so multi-node
//! transactions need no dry run but TPC-C's Payments by last name.

use std::path::Path;

use phasedb_dist::calvin::serve::serve;
use phasedb_dist::calvin::{Groups, Lock, partition_locks};
use phasedb_net::ClusterConfig;
use phasedb_txn::TableId;
use phasedb_workloads::tpcc::{TpccProcedures, TpccRequest};
use phasedb_workloads::ycsb::{YcsbProcedures, YcsbRequest};

use super::star_workload::StarWorkload;

fn tpcc_locks(w: &TpccProcedures, req: &TpccRequest, out: &mut Vec<Lock>) {
    w.lock_set(req, out)
}

fn tpcc_reads(w: &TpccProcedures, req: &TpccRequest, out: &mut Vec<(TableId, u64)>) -> bool {
    w.read_rows(req, out)
}

fn ycsb_reads(w: &YcsbProcedures, req: &YcsbRequest, out: &mut Vec<(TableId, u64)>) -> bool {
    w.read_rows(req, out)
}

/// Serves node `id` of the Calvin cluster `cfg` (read from `path`); returns the exit code as
/// STAR's nodes do (2 refused, 1 cannot serve, 0 clean stop).
pub fn run(
    path: &Path,
    cfg: &ClusterConfig,
    id: u32,
    listener: Option<std::net::TcpListener>,
    quiet: bool,
    stats_file: Option<&Path>,
) -> i32 {
    let star = cfg.star.as_ref().expect("called for a [star] table");
    let refuse = |e: String| {
        eprintln!("error: {}: {e}", path.display());
        2
    };
    let workload = match StarWorkload::from_config(star) {
        Ok(w) => w,
        Err(e) => return refuse(e),
    };
    let groups = match Groups::from_cluster(cfg) {
        Ok(g) => g,
        Err(e) => return refuse(e.to_string()),
    };
    if !quiet {
        eprintln!(
            "node {id} of a calvin cluster of {} (replica groups {}): {} ({}), owning partitions {:?}{}; loading every partition, then serving on {}",
            groups.nodes(),
            groups.name(),
            workload.name(),
            workload.args().join(" "),
            groups.owned(id),
            if id == groups.sequencer() {
                ", sequencer"
            } else {
                ""
            },
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
                serve(
                    cfg,
                    id,
                    w,
                    partition_locks::<YcsbProcedures>,
                    ycsb_reads,
                    listener,
                    shutdown,
                )
                .await
            }
            StarWorkload::Tpcc(c) => {
                let w = TpccProcedures::new(c);
                serve(cfg, id, w, tpcc_locks, tpcc_reads, listener, shutdown).await
            }
        }
    });
    match result {
        Ok(stats) => {
            if let Some(file) = stats_file
                && let Err(e) = std::fs::write(file, super::star_node::to_text(&stats))
            {
                eprintln!("error: cannot write {}: {e}", file.display());
                return 1;
            }
            if !quiet {
                eprintln!(
                    "node {id} stopped cleanly after batch {}: {} committed, {} aborted",
                    stats.phase,
                    stats.committed(),
                    stats.aborted()
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
