//! The broadcast substrate over real TCP on 127.0.0.1: three members, two groups, every member
//! proposing; every member delivers every payload, in the same order per group.

#[path = "broadcast/harness.rs"]
mod harness;

use std::time::Duration;

use harness::{Load, payload_id, run_tcp};
use phasedb_dist::broadcast::BroadcastConfig;

#[test]
fn three_members_over_tcp_deliver_every_payload_in_the_same_order_per_group() {
    let groups = vec![(0, vec![0, 1, 2]), (1, vec![0, 1, 2])];
    let per_node = 500;
    let load = Load {
        per_tick: 0,
        window: 32,
        limit: per_node,
        size: 32,
    };
    let target = 2 * 3 * per_node;
    let replicas = run_tcp(
        3,
        &groups,
        &BroadcastConfig::default(),
        load,
        target,
        |_, t| t > Duration::from_secs(20),
    );
    for r in &replicas {
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.refused, 0, "node {} refused messages", r.me);
    }
    for (g, _) in &groups {
        let first = &replicas[0].log[g];
        assert_eq!(
            first.len() as u64,
            3 * per_node,
            "group {g}: node 0 delivered {} of {} within 20 s",
            first.len(),
            3 * per_node
        );
        for r in &replicas[1..] {
            assert!(
                r.log[g] == *first,
                "group {g}: node {} differs from node 0",
                r.me
            );
        }
        let mut ids: Vec<_> = first.iter().map(|p| payload_id(p).unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len() as u64, 3 * per_node, "group {g}: a payload twice");
    }
}
