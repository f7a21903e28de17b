//! Who holds and who masters each partition (STAR §3, §5.1, Figure 2).
//!
//! Nodes `0..f` are *full replicas*: each holds every partition. The other `k` nodes are *partial
//! replicas*. Every partition has one *primary* — the node that runs its single-partition
//! transactions in the partitioned phase — and `replicas_per_partition - 1` *secondaries* on other
//! nodes, every full replica among them. By default primaries are spread round robin over the
//! partial replicas (over the full replicas when `k = 0`), and a partition that needs more copies
//! than the full replicas and its primary gets them on the next partial replicas. The
//! *coordinator*, which runs the single-master phase (§4.2) and drives the phase switches (§4.3),
//! is the first full replica, node 0. [`spread_placement`] instead spreads the primaries over
//! every node, full replicas included (the cluster benchmark's and the experiments' placement).
//!
//! An explicit placement lists, for each partition, its primary then its secondaries; it must name
//! `replicas_per_partition` distinct nodes including every full replica (full replicas hold every
//! partition). It may put a primary on a full replica, as the paper's Figure 2 does.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use phasedb_net::{Addr, ClusterConfig, StarConfig};
use phasedb_txn::PartitionId;

/// Why a STAR layout was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("impossible STAR layout: {0}")]
pub struct LayoutError(pub String);

fn refuse(msg: impl Into<String>) -> LayoutError {
    LayoutError(msg.into())
}

/// A validated placement of partitions on nodes, with the run's iteration time and workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    nodes: u32,
    full_replicas: u32,
    replicas: u32,
    workers: u32,
    iteration: Duration,
    /// Per partition: its primary, then its secondaries (live nodes only once a node failed).
    holders: Vec<Vec<Addr>>,
    /// Nodes declared failed (§7.1), in the order they failed.
    failed: Vec<Addr>,
    /// The placement as configured, before any failure: what a restarted node holds again.
    original: Vec<Vec<Addr>>,
    /// The node that switches phases and runs the single-master phase.
    coordinator: Addr,
    /// Restarted nodes still copying their partitions (§7.2): they hold their partitions as
    /// secondaries but are neither re-mastered onto nor made coordinator.
    recovering: Vec<Addr>,
}

impl Layout {
    /// The layout `star` describes over `nodes` nodes.
    pub fn new(nodes: u32, star: &StarConfig) -> Result<Layout, LayoutError> {
        star.validate(nodes).map_err(|e| refuse(e.to_string()))?;
        let f = star.full_replicas;
        let r = star.replicas_per_partition;
        let holders = match &star.placement {
            Some(explicit) => check_explicit(explicit, f, r)?,
            None => computed(nodes, f, r, star.partitions)?,
        };
        Ok(Layout {
            nodes,
            full_replicas: f,
            replicas: r,
            workers: star.workers,
            iteration: star.iteration(),
            original: holders.clone(),
            holders,
            failed: Vec::new(),
            coordinator: 0,
            recovering: Vec::new(),
        })
    }

    /// The layout of a cluster file's `[star]` table.
    pub fn from_cluster(cfg: &ClusterConfig) -> Result<Layout, LayoutError> {
        let star = cfg
            .star
            .as_ref()
            .ok_or_else(|| refuse("the cluster file has no [star] table"))?;
        Layout::new(cfg.nodes.len() as u32, star)
    }

    /// Nodes in the cluster (ids `0..nodes`).
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Partitions (`0..partitions`).
    pub fn partitions(&self) -> u32 {
        self.holders.len() as u32
    }

    /// Full replicas: nodes `0..full_replicas`.
    pub fn full_replicas(&self) -> u32 {
        self.full_replicas
    }

    /// Copies of each partition, its primary included.
    pub fn replicas_per_partition(&self) -> u32 {
        self.replicas
    }

    /// Worker threads per node, as configured (nodes run their transactions inline for now).
    pub fn workers(&self) -> u32 {
        self.workers
    }

    /// One partitioned phase plus one single-master phase.
    pub fn iteration(&self) -> Duration {
        self.iteration
    }

    /// The node that runs the single-master phase and switches phases: the first full replica
    /// that has not failed (§7.2: "the next available node with a full copy"); `None` once every
    /// full replica failed.
    pub fn live_coordinator(&self) -> Option<Addr> {
        (0..self.full_replicas).find(|n| !self.failed.contains(n) && !self.recovering.contains(n))
    }

    /// The coordinator: node 0, then after each failure of the coordinator
    /// [`Layout::live_coordinator`], or once no full replica is left the *fall-back leader*
    /// ([`Layout::fall_back_leader`]), which ends the interrupted phase and switches the cluster
    /// to Dist-OCC (§7.2). A restarted coordinator does not take its role back: the role moves
    /// only when its holder fails.
    pub fn coordinator(&self) -> Addr {
        self.coordinator
    }

    /// Whether a full replica is alive: the cluster can run STAR's phases (else it falls back
    /// to Dist-OCC, §7.2).
    pub fn has_full_replica(&self) -> bool {
        self.live_coordinator().is_some()
    }

    /// The lowest node that is neither failed, recovering, nor `except`: who leads the fall-back
    /// to Dist-OCC once no full replica is left (§7.2). Every survivor computes the same one from
    /// the same failures.
    pub fn fall_back_leader(&self, except: Addr) -> Option<Addr> {
        (0..self.nodes)
            .find(|&n| n != except && !self.failed.contains(&n) && !self.recovering.contains(&n))
    }

    /// Whether `node` restarted and is still copying its partitions (§7.2).
    pub fn is_recovering(&self, node: Addr) -> bool {
        self.recovering.contains(&node)
    }

    /// The restarted nodes still copying their partitions.
    pub fn recovering(&self) -> &[Addr] {
        &self.recovering
    }

    /// Failed node `node` restarted (§7.2): it holds the partitions of its configured placement
    /// again, as the last secondary of each (partitions stay mastered where fail-over put them),
    /// and is recovering until [`Layout::recovered`]. No-op for a node not failed.
    pub fn rejoin(&mut self, node: Addr) {
        let Some(at) = self.failed.iter().position(|&n| n == node) else {
            return;
        };
        self.failed.remove(at);
        self.recovering.push(node);
        for (p, holders) in self.holders.iter_mut().enumerate() {
            if self.original[p].contains(&node) && !holders.contains(&node) {
                holders.push(node);
            }
        }
    }

    /// Restarted node `node` has copied every partition it holds: it is a secondary like any.
    pub fn recovered(&mut self, node: Addr) {
        self.recovering.retain(|&n| n != node);
    }

    /// The nodes declared failed, in the order they failed.
    pub fn failed(&self) -> &[Addr] {
        &self.failed
    }

    /// Whether `node` is declared failed.
    pub fn is_failed(&self, node: Addr) -> bool {
        self.failed.contains(&node)
    }

    /// Node `node` failed (fail-stop, §7.1): it holds nothing any more, and each partition it
    /// mastered is re-mastered at once on a live full replica that holds it, or else on its first
    /// surviving secondary (§7.1: "the primary records of the failed node can be re-mastered to a
    /// node employing full replication"). Returns the re-mastered partitions with their new
    /// primaries, or an error naming a partition left with no live copy.
    pub fn fail(&mut self, node: Addr) -> Result<Vec<(PartitionId, Addr)>, LayoutError> {
        if node >= self.nodes || self.failed.contains(&node) {
            return Ok(Vec::new());
        }
        self.failed.push(node);
        self.recovering.retain(|&n| n != node);
        if node == self.coordinator {
            self.coordinator = self
                .live_coordinator()
                .or_else(|| self.fall_back_leader(node))
                .unwrap_or(0);
        }
        let full = self.full_replicas;
        let recovering = &self.recovering;
        let mut moved = Vec::new();
        for (p, holders) in self.holders.iter_mut().enumerate() {
            let Some(at) = holders.iter().position(|&n| n == node) else {
                continue;
            };
            holders.remove(at);
            if holders.iter().all(|n| recovering.contains(n)) {
                return Err(refuse(format!(
                    "partition {p} has no live copy left after node {node} failed"
                )));
            }
            if at == 0 {
                let whole = |n: &Addr| !recovering.contains(n);
                let new = holders
                    .iter()
                    .position(|n| *n < full && whole(n))
                    .or_else(|| holders.iter().position(whole))
                    .unwrap_or(0);
                holders.swap(0, new);
                moved.push((p as PartitionId, holders[0]));
            }
        }
        Ok(moved)
    }

    /// Whether `node` holds every partition.
    pub fn is_full(&self, node: Addr) -> bool {
        node < self.full_replicas
    }

    /// The node that masters partition `p` in the partitioned phase.
    pub fn primary(&self, p: PartitionId) -> Addr {
        self.holders[p as usize][0]
    }

    /// The nodes holding a secondary copy of `p`.
    pub fn secondaries(&self, p: PartitionId) -> &[Addr] {
        &self.holders[p as usize][1..]
    }

    /// Every node holding `p`, its primary first.
    pub fn replicas(&self, p: PartitionId) -> &[Addr] {
        &self.holders[p as usize]
    }

    /// Whether `node` holds a copy of `p`.
    pub fn holds(&self, node: Addr, p: PartitionId) -> bool {
        self.replicas(p).contains(&node)
    }

    /// The partitions `node` holds, in order.
    pub fn held(&self, node: Addr) -> Vec<PartitionId> {
        (0..self.partitions())
            .filter(|&p| self.holds(node, p))
            .collect()
    }

    /// The partitions `node` masters in the partitioned phase, in order.
    pub fn mastered(&self, node: Addr) -> Vec<PartitionId> {
        (0..self.partitions())
            .filter(|&p| self.primary(p) == node)
            .collect()
    }
}

/// A placement with the primaries round robin over every node (partition `p` on node
/// `p % nodes`), each partition's secondaries on the full replicas and then on the partial
/// replicas that follow its primary: every node masters a share of the data, as in the paper's
/// Figure 2 and its evaluation (§8.1.3), so the partitioned phase keeps every node busy and the
/// baselines' distributed transactions (Dist-OCC, Dist-S2PL) really cross nodes. The default
/// layout ([`Layout::new`] without a placement) masters nothing on the full replicas instead.
pub fn spread_placement(
    nodes: u32,
    f: u32,
    r: u32,
    partitions: u32,
) -> Result<Vec<Vec<Addr>>, LayoutError> {
    check_counts(nodes, f, r)?;
    Ok((0..partitions)
        .map(|p| {
            let primary = p % nodes;
            let mut holders = vec![primary];
            holders.extend((0..f).filter(|&n| n != primary));
            let partial = (1..nodes)
                .map(|j| (primary + j) % nodes)
                .filter(|&n| n >= f);
            holders.extend(partial.take((r as usize).saturating_sub(holders.len())));
            holders
        })
        .collect())
}

/// Refuses copy counts no placement can meet: full replicas hold every partition, and partial
/// replicas need copies to hold.
fn check_counts(nodes: u32, f: u32, r: u32) -> Result<(), LayoutError> {
    if f == 0 || f > nodes || r > nodes {
        return Err(refuse(format!(
            "{f} full replicas and {r} copies of each partition do not fit {nodes} nodes"
        )));
    }
    let k = nodes - f;
    if r < f {
        return Err(refuse(format!(
            "replicas_per_partition = {r} is below full_replicas = {f}: full replicas hold every partition"
        )));
    }
    if k > 0 && r == f {
        return Err(refuse(format!(
            "replicas_per_partition = {r} leaves the {k} partial replicas without data: with \
             {f} full replicas it must be at least {}",
            f + 1
        )));
    }
    if k == 0 && r != nodes {
        return Err(refuse(format!(
            "every node is a full replica, so each partition has {nodes} copies, not replicas_per_partition = {r}"
        )));
    }
    Ok(())
}

/// The default placement: primaries round robin over the partial replicas (full ones if none).
fn computed(nodes: u32, f: u32, r: u32, partitions: u32) -> Result<Vec<Vec<Addr>>, LayoutError> {
    check_counts(nodes, f, r)?;
    let k = nodes - f;
    Ok((0..partitions)
        .map(|p| {
            if k == 0 {
                let primary = p % f;
                std::iter::once(primary)
                    .chain((0..f).filter(|&n| n != primary))
                    .collect()
            } else {
                let partial = |j: u32| f + (p + j) % k;
                std::iter::once(partial(0))
                    .chain(0..f)
                    .chain((1..r - f).map(partial))
                    .collect()
            }
        })
        .collect())
}

fn check_explicit(explicit: &[Vec<u32>], f: u32, r: u32) -> Result<Vec<Vec<Addr>>, LayoutError> {
    for (p, holders) in explicit.iter().enumerate() {
        if holders.len() != r as usize {
            return Err(refuse(format!(
                "partition {p} is placed on {} nodes {holders:?}, but replicas_per_partition = {r}",
                holders.len()
            )));
        }
        for (i, n) in holders.iter().enumerate() {
            if holders[..i].contains(n) {
                return Err(refuse(format!("partition {p} puts two copies on node {n}")));
            }
        }
        if let Some(missing) = (0..f).find(|n| !holders.contains(n)) {
            return Err(refuse(format!(
                "partition {p} is not on full replica {missing}: full replicas hold every partition"
            )));
        }
    }
    Ok(explicit.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(partitions: u32, f: u32, r: u32) -> StarConfig {
        StarConfig {
            full_replicas: f,
            replicas_per_partition: r,
            ..StarConfig::new(partitions)
        }
    }

    fn refused(nodes: u32, s: &StarConfig) -> String {
        match Layout::new(nodes, s) {
            Ok(l) => panic!("accepted {l:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn primaries_spread_over_partial_replicas_with_the_full_replica_as_secondary() {
        let l = Layout::new(4, &star(6, 1, 2)).unwrap();
        assert_eq!(l.coordinator(), 0);
        for p in 0..6 {
            assert_eq!(l.primary(p), 1 + p % 3);
            assert_eq!(l.secondaries(p), &[0]);
        }
        assert_eq!(l.held(0), (0..6).collect::<Vec<_>>());
        assert_eq!(l.held(2), vec![1, 4]);
        assert_eq!(l.mastered(2), vec![1, 4]);
        assert!(l.mastered(0).is_empty());
        assert_eq!(l.iteration(), Duration::from_millis(10));
    }

    #[test]
    fn extra_copies_go_to_the_next_partial_replicas() {
        let l = Layout::new(5, &star(4, 2, 4)).unwrap();
        assert_eq!(l.replicas(0), &[2, 0, 1, 3]);
        assert_eq!(l.replicas(2), &[4, 0, 1, 2]);
        assert!(l.is_full(1) && !l.is_full(2));
    }

    #[test]
    fn with_only_full_replicas_primaries_spread_over_them() {
        let l = Layout::new(2, &star(4, 2, 2)).unwrap();
        assert_eq!(l.replicas(0), &[0, 1]);
        assert_eq!(l.replicas(1), &[1, 0]);
        assert_eq!(l.mastered(1), vec![1, 3]);
    }

    #[test]
    fn a_spread_placement_masters_partitions_on_every_node() {
        for (nodes, f, r, partitions) in [(2, 1, 2, 2), (3, 1, 2, 3), (4, 1, 3, 8), (5, 2, 3, 10)] {
            let mut s = star(partitions, f, r);
            s.placement = Some(spread_placement(nodes, f, r, partitions).unwrap());
            let l = Layout::new(nodes, &s).unwrap();
            for n in 0..nodes {
                assert_eq!(
                    l.mastered(n).len() as u32,
                    partitions / nodes,
                    "node {n} of {nodes}: {l:?}"
                );
            }
        }
        assert_eq!(
            spread_placement(3, 1, 2, 3).unwrap(),
            vec![vec![0, 1], vec![1, 0], vec![2, 0]]
        );
        assert_eq!(spread_placement(4, 1, 3, 4).unwrap()[2], vec![2, 0, 3]);
        assert!(
            spread_placement(3, 1, 1, 3)
                .unwrap_err()
                .to_string()
                .contains("partial replicas without data")
        );
        assert!(
            spread_placement(2, 3, 2, 2)
                .unwrap_err()
                .to_string()
                .contains("do not fit 2 nodes")
        );
    }

    #[test]
    fn impossible_layouts_are_refused_with_the_reason() {
        assert!(refused(3, &star(4, 0, 2)).contains("full_replicas must be at least 1"));
        assert!(refused(3, &star(4, 1, 4)).contains("replicas_per_partition must be 1..=3"));
        assert!(refused(3, &star(0, 1, 2)).contains("partitions must be 1..=65536"));
        assert!(refused(3, &star(4, 2, 1)).contains("below full_replicas"));
        assert!(refused(3, &star(4, 1, 1)).contains("partial replicas without data"));
        assert!(refused(2, &star(4, 2, 1)).contains("below full_replicas"));
        let mut s = star(2, 1, 2);
        s.placement = Some(vec![vec![1, 0], vec![2]]);
        assert!(refused(3, &s).contains("partition 1 is placed on 1 nodes"));
        s.placement = Some(vec![vec![1, 0], vec![2, 2]]);
        assert!(refused(3, &s).contains("partition 1 puts two copies on node 2"));
        s.placement = Some(vec![vec![1, 0], vec![2, 1]]);
        assert!(refused(3, &s).contains("partition 1 is not on full replica 0"));
        s.placement = Some(vec![vec![1, 0]]);
        assert!(refused(3, &s).contains("placement lists 1 partitions"));
    }

    #[test]
    fn an_explicit_placement_is_kept_as_given() {
        let mut s = star(3, 1, 2);
        s.placement = Some(vec![vec![0, 1], vec![2, 0], vec![1, 0]]);
        let l = Layout::new(3, &s).unwrap();
        assert_eq!(l.primary(0), 0);
        assert_eq!(l.secondaries(0), &[1]);
        assert_eq!(l.mastered(1), vec![2]);
        assert_eq!(l.held(2), vec![1]);
    }

    #[test]
    fn a_cluster_file_without_star_is_refused() {
        let cfg = ClusterConfig::from_toml("[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n").unwrap();
        assert!(
            Layout::from_cluster(&cfg)
                .unwrap_err()
                .to_string()
                .contains("no [star] table")
        );
    }

    #[test]
    fn with_no_full_replica_left_the_lowest_live_node_leads_the_fall_back() {
        // Node 0 full; each partition on its primary, node 0 and the next partial replica.
        let mut l = Layout::new(4, &star(3, 1, 3)).unwrap();
        assert!(l.has_full_replica());
        assert_eq!(l.fall_back_leader(0), Some(1));
        assert_eq!(l.fail(0), Ok(Vec::new()), "node 0 mastered nothing");
        assert!(!l.has_full_replica());
        assert_eq!(l.coordinator(), 1, "the lowest live node");
        // Node 1's partition goes to its surviving secondary.
        let moved = l.fail(1).unwrap();
        assert_eq!(moved, vec![(0, 2)]);
        assert_eq!(
            l.coordinator(),
            2,
            "the leader failed: the next lowest live node"
        );
        assert_eq!(l.replicas(2), &[3]);
        // Partition 0 was on nodes 1, 0 and 2: no copy left after node 2 too.
        let e = l.fail(2).unwrap_err().to_string();
        assert!(e.contains("partition 0 has no live copy"), "{e}");
    }
}
