//! Routing of items to the servers that hold them.

use std::sync::Arc;

use crate::ramp::msg::Key;
use phasedb_net::{Addr, ClusterConfig, partition_of};

/// Maps an item to its server by hash partition and placement.
#[derive(Clone, Debug)]
pub struct Router {
    partitions: u32,
    placement: Arc<[Addr]>,
}

impl Router {
    /// The routing of a cluster.
    pub fn new(cfg: &ClusterConfig) -> Router {
        Router {
            partitions: cfg.partitions,
            placement: cfg.placement.clone().into(),
        }
    }

    /// `n` servers with one partition each (simulator tests).
    pub fn uniform(n: u32) -> Router {
        Router {
            partitions: n,
            placement: (0..n).collect::<Vec<_>>().into(),
        }
    }

    /// The server holding `key`.
    pub fn node_of(&self, key: Key) -> Addr {
        self.placement[partition_of(key, self.partitions) as usize]
    }

    /// Groups `items` by server, keeping their order within each group.
    pub fn group<T>(
        &self,
        items: impl IntoIterator<Item = (Key, T)>,
    ) -> Vec<(Addr, Vec<(Key, T)>)> {
        let mut groups: Vec<(Addr, Vec<(Key, T)>)> = Vec::new();
        for (k, t) in items {
            let node = self.node_of(k);
            match groups.iter_mut().find(|g| g.0 == node) {
                Some(g) => g.1.push((k, t)),
                None => groups.push((node, vec![(k, t)])),
            }
        }
        groups
    }
}
