//! Performance sanity: a large serial history checks quickly (no timing
//! assertion; the elapsed time is printed with --nocapture).

mod common;

use common::{Rng, random_ops, shuffle, simulate};
use phasedb_check::check_serializable;
use std::time::Instant;

#[test]
fn two_hundred_thousand_transactions() {
    let mut rng = Rng(42);
    let mut h = simulate(&random_ops(&mut rng, 200_000, 10_000));
    shuffle(&mut h, &mut rng);
    let start = Instant::now();
    let stats = check_serializable(&h).expect("a serial history is serializable");
    println!("checked {stats:?} in {:?}", start.elapsed());
    assert_eq!(stats.transactions, 200_000);
    assert!(stats.ww_edges > 0 && stats.wr_edges > 0 && stats.rw_edges > 0);
}

#[test]
fn long_dependency_chain_does_not_overflow_the_stack() {
    // One hot item: every transaction reads-modifies-writes it, so the graph
    // is a single 300K-long chain.
    let ops = vec![vec![common::Op::Rmw(0)]; 300_000];
    let mut h = simulate(&ops);
    let last = h.txns.len() - 1;
    h.txns[last].reads.push(common::r(1, 0));
    h.txns[0].writes.push(common::w(1, 10_000_000, 0));
    let err = check_serializable(&h).unwrap_err();
    assert!(matches!(err, phasedb_check::Anomaly::Cycle(ref c) if c.edges.len() == 300_000));
}

#[test]
#[ignore = "a million transactions: run with --ignored to measure"]
fn one_million_transactions() {
    let mut rng = Rng(7);
    let mut h = simulate(&random_ops(&mut rng, 1_000_000, 50_000));
    shuffle(&mut h, &mut rng);
    let start = Instant::now();
    let stats = check_serializable(&h).expect("a serial history is serializable");
    println!("checked {stats:?} in {:?}", start.elapsed());
}
