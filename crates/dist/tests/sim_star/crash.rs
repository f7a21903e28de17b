//! Crashing one STAR node at a chosen kind of moment under the simulator, shared by the fail-over
//! and fall-back tests: the cluster starts, runs a while that depends on the seed, and the victim
//! is crashed (fail-stop) once it is in a partitioned phase, a single-master phase or a fence.

use phasedb_dist::star::{Layout, PhaseKind, StarNode, StarSettings};
use phasedb_net::Addr;
use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_txn::{Database, Procedures, Star};
use serde::Serialize;
use serde::de::DeserializeOwned;

const MS: u64 = 1_000_000;

/// When the victim is crashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Partitioned,
    SingleMaster,
    Fence,
}

/// Runs `layout`'s nodes (with `settings`, on `dbs`) under delays that reorder messages, then
/// crashes `victim` at the first moment of kind `when`; returns the simulator just after the crash.
pub fn start_and_crash<'w, W>(
    seed: u64,
    layout: &Layout,
    settings: &StarSettings,
    w: &'w W,
    dbs: &'w [Database<Star>],
    victim: Addr,
    when: When,
) -> Simulator<StarNode<'w, W>>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let mut sim = Simulator::new(SimConfig {
        min_delay: 20_000,
        max_delay: 400_000,
        tick: MS / 2,
        ..SimConfig::new(seed)
    });
    for n in 0..layout.nodes() {
        let node = StarNode::new(n, layout.clone(), settings.clone(), &dbs[n as usize], w);
        sim.add(n, node.unwrap());
    }
    sim.run_until((20 + seed % 23) * MS);
    let found = sim.run_until_pred(sim.now() + 500 * MS, |sim| {
        let v = sim.node(victim);
        let kind = PhaseKind::of(v.phase());
        match when {
            When::Fence => v.in_fence(),
            When::Partitioned => kind == PhaseKind::Partitioned && !v.in_fence(),
            When::SingleMaster => kind == PhaseKind::SingleMaster && !v.in_fence(),
        }
    });
    assert!(found, "seed {seed}: node {victim} never reached {when:?}");
    sim.crash(victim);
    sim
}
