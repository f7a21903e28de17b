//! Calvin's replica groups (Thomson et al. 2012, §3; STAR §8.3): the nodes are split into groups,
//! in node order, and each group holds the whole database, its partitions spread round robin over
//! the group's nodes. Every group runs every transaction of the global order; a transaction's
//! *participants* in a group are the group's nodes that own a partition it touches. Node 0, the
//! first node of the first group, is the sequencer.

use std::ops::Range;

use phasedb_net::{Addr, ClusterConfig};
use phasedb_txn::PartitionId;

use crate::star::LayoutError;

/// A validated split of the nodes into replica groups over `partitions` partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    sizes: Vec<u32>,
    first: Vec<Addr>,
    partitions: u32,
}

impl Groups {
    /// Groups of `sizes` nodes each (in node order) over `partitions` partitions.
    pub fn new(sizes: &[u32], partitions: u32) -> Result<Groups, LayoutError> {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err(LayoutError(format!(
                "Calvin's replica groups {sizes:?} must be one or more positive sizes"
            )));
        }
        if partitions == 0 {
            return Err(LayoutError("Calvin needs at least one partition".into()));
        }
        if let Some(&big) = sizes.iter().find(|&&s| s > partitions) {
            return Err(LayoutError(format!(
                "a replica group of {big} nodes over {partitions} partitions leaves a node without data"
            )));
        }
        let first = sizes
            .iter()
            .scan(0, |next, &s| {
                let at = *next;
                *next += s;
                Some(at)
            })
            .collect();
        Ok(Groups {
            sizes: sizes.to_vec(),
            first,
            partitions,
        })
    }

    /// The groups of a cluster file's `[star]` table (`calvin_groups`, default one group of all).
    pub fn from_cluster(cfg: &ClusterConfig) -> Result<Groups, LayoutError> {
        let star = cfg
            .star
            .as_ref()
            .ok_or_else(|| LayoutError("the cluster file has no [star] table".into()))?;
        let nodes = cfg.nodes.len() as u32;
        let sizes = star.calvin_groups.clone().unwrap_or_else(|| vec![nodes]);
        if sizes.iter().sum::<u32>() != nodes {
            return Err(LayoutError(format!(
                "Calvin's replica groups {sizes:?} do not add up to the {nodes} nodes"
            )));
        }
        Groups::new(&sizes, star.partitions)
    }

    /// Parses the paper's names of a split: "1:3", "2:2", "4".
    pub fn parse(text: &str) -> Result<Vec<u32>, String> {
        text.split(':')
            .map(|s| match s.trim().parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "Calvin's replica groups are sizes joined by ':' such as 1:3, 2:2 or 4, not {text:?}"
                )),
            })
            .collect()
    }

    /// The split's name in the paper's style ("1:3").
    pub fn name(&self) -> String {
        let parts: Vec<String> = self.sizes.iter().map(u32::to_string).collect();
        parts.join(":")
    }

    /// Nodes in the cluster.
    pub fn nodes(&self) -> u32 {
        self.sizes.iter().sum()
    }

    /// Replica groups.
    pub fn groups(&self) -> usize {
        self.sizes.len()
    }

    /// Partitions of the data.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The node that sequences every batch.
    pub fn sequencer(&self) -> Addr {
        0
    }

    /// The group `node` belongs to.
    pub fn group_of(&self, node: Addr) -> usize {
        self.first
            .iter()
            .rposition(|&f| f <= node)
            .expect("group 0 starts at node 0")
    }

    /// The nodes of group `g`.
    pub fn members(&self, g: usize) -> Range<Addr> {
        self.first[g]..self.first[g] + self.sizes[g]
    }

    /// The node of group `g` that owns partition `p`.
    pub fn owner(&self, g: usize, p: PartitionId) -> Addr {
        self.first[g] + p % self.sizes[g]
    }

    /// The partitions `node` owns in its group, in order.
    pub fn owned(&self, node: Addr) -> Vec<PartitionId> {
        let g = self.group_of(node);
        (0..self.partitions)
            .filter(|&p| self.owner(g, p) == node)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_spread_round_robin_within_each_group() {
        let g = Groups::new(&[1, 3], 6).unwrap();
        assert_eq!((g.nodes(), g.groups(), g.name()), (4, 2, "1:3".to_string()));
        assert_eq!(g.owned(0), (0..6).collect::<Vec<_>>());
        assert_eq!(g.owned(1), vec![0, 3]);
        assert_eq!(g.owned(3), vec![2, 5]);
        assert_eq!((g.group_of(0), g.group_of(1), g.group_of(3)), (0, 1, 1));
        assert_eq!(g.members(1), 1..4);
        assert_eq!(g.owner(1, 4), 2);
    }

    #[test]
    fn bad_splits_are_refused() {
        assert_eq!(Groups::parse("2:2"), Ok(vec![2, 2]));
        assert_eq!(Groups::parse("4"), Ok(vec![4]));
        assert!(Groups::parse("1:x").unwrap_err().contains("1:3"));
        assert!(Groups::parse("0:4").is_err());
        assert!(Groups::new(&[], 4).is_err());
        assert!(
            Groups::new(&[4], 2)
                .unwrap_err()
                .to_string()
                .contains("without data")
        );
    }
}
