//! The history check shared by the P-DUR simulator tests.

use phasedb_check::check_serializable;
use phasedb_dist::pdur::history::HistoryRecorder;
use phasedb_dist::pdur::node::PdurNode;
use phasedb_net::Addr;
use phasedb_net::sim::Simulator;

/// Checks the history of every replica in `nodes`, once the live ones quiesced:
/// - each replica's own is atomic: no transaction committed at some of its partitions and
///   aborted or missing at others, the decisions its restores' images covered counted
///   ([`HistoryRecorder::atomicity`]);
/// - the replicas agree: every decision two of them recorded is the same, commit or abort and
///   at the same version, and their merge — the cluster's history (each records only its own
///   clients' read-only transactions) — is serializable;
/// - the own history of each live replica never restored is serializable as it is. A restored
///   replica's is not a history on its own: it lacks, whole, the transactions its images
///   covered, whose versions its clients read. Nor is a crashed replica's: it stopped with
///   transactions waiting for votes whose versions later transactions, read elsewhere and
///   decided here, had read.
pub fn check_history(sim: &Simulator<PdurNode>, nodes: &[Addr]) {
    let seed = sim.seed();
    for &n in nodes {
        let rec = sim.node(n).history().expect("recorded");
        if let Err(e) = rec.atomicity() {
            panic!(
                "seed {seed}: replica {n} (restored {} times) recorded a transaction that is not atomic: {e} (replay: PHASEDB_SIM_SEED={seed})",
                rec.restores()
            );
        }
    }
    let all = HistoryRecorder::merged(
        nodes
            .iter()
            .map(|&n| sim.node(n).history().expect("recorded")),
    )
    .unwrap_or_else(|e| panic!("seed {seed}: {e} (replay: PHASEDB_SIM_SEED={seed})"));
    if let Err(a) = check_serializable(&all.history(|_| true)) {
        panic!("seed {seed}: not serializable: {a} (replay: PHASEDB_SIM_SEED={seed})");
    }
    for &n in nodes {
        let rec = sim.node(n).history().expect("recorded");
        if sim.is_up(n)
            && rec.restores() == 0
            && let Err(a) = check_serializable(&rec.history(|_| true))
        {
            panic!(
                "seed {seed}: replica {n}'s history is not serializable: {a} (replay: PHASEDB_SIM_SEED={seed})"
            );
        }
    }
}
