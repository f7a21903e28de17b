//! What the Calvin simulator tests share: a cluster of Calvin nodes under the deterministic
//! simulator with delays that reorder every message, run with load and then until every node has
//! run every batch.

use phasedb_dist::calvin::{CalvinNode, CalvinSettings, Groups, LockSet, ReadRows};
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_txn::{Database, Occ, Procedures};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub const MS: u64 = 1_000_000;

/// The workload's read/write sets and named read rows.
pub struct Sets<W: Procedures> {
    pub locks: LockSet<W>,
    pub reads: ReadRows<W>,
}

/// Runs the replica groups `groups` (node `n` over `dbs[n]`) with the sequencer drawing requests
/// `cross_partition` of which are multi-partition, for `load_ms` of load, then until every node
/// ran every batch (asserted); returns the simulator to inspect.
pub fn run_calvin<'db, W>(
    seed: u64,
    groups: &Groups,
    cross_partition: f64,
    load_ms: u64,
    dbs: &'db [Database<Occ>],
    w: &'db W,
    sets: Sets<W>,
) -> Simulator<CalvinNode<'db, W>>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let mut sim = Simulator::new(SimConfig {
        min_delay: 20_000,
        max_delay: 3_000_000,
        tick: MS / 2,
        ..SimConfig::new(seed)
    });
    let settings = CalvinSettings {
        cross_partition,
        local_load: true,
        seed,
        slice_txns: 8,
        keep_order: true,
        ..CalvinSettings::default()
    };
    for n in 0..groups.nodes() {
        let node = CalvinNode::new(
            n,
            groups.clone(),
            settings.clone(),
            &dbs[n as usize],
            w,
            sets.locks,
            sets.reads,
        )
        .unwrap();
        sim.add(n, node);
    }
    sim.run_until(load_ms * MS);
    sim.node_mut(0).set_local_load(false);
    sim.run_until(sim.now() + 15 * MS);
    let last = sim.node(0).stats().times.phases;
    let nodes = groups.nodes();
    let quiet = sim.run_until_pred(sim.now() + 10_000 * MS, |sim| {
        (0..nodes).all(|n| sim.node(n).finished() >= last && sim.node(n).is_idle())
    });
    assert!(
        quiet,
        "seed {seed}: groups {} did not finish batch {last} (replay: PHASEDB_SIM_SEED={seed})",
        groups.name()
    );
    sim
}
