//! The history check shared by the P-DUR simulator tests.

use phasedb_check::check_serializable;
use phasedb_dist::pdur::history::HistoryRecorder;
use phasedb_dist::pdur::node::PdurNode;
use phasedb_net::Addr;
use phasedb_net::sim::Simulator;

/// The history of replicas `nodes` is serializable: their recorders merged (a replica restored
/// from a snapshot lacks the decisions it covered; each records only its own clients' read-only
/// transactions), and each never-restored replica's own.
pub fn check_history(sim: &Simulator<PdurNode>, nodes: &[Addr]) {
    let seed = sim.seed();
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
        if sim.node(n).stats().restores == 0 {
            let h = sim.node(n).history().expect("recorded").history(|_| true);
            if let Err(a) = check_serializable(&h) {
                panic!(
                    "seed {seed}: replica {n}'s history is not serializable: {a} (replay: PHASEDB_SIM_SEED={seed})"
                );
            }
        }
    }
}
