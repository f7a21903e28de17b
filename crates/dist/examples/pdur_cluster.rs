//! A P-DUR cluster over TCP on 127.0.0.1: `replicas` [`PdurNode`]s in one process, each with a
//! broadcast group per partition and its own clients running the micro-benchmark.
//!
//! `cargo run --release -p phasedb-dist --example pdur_cluster -- [replicas] [partitions]
//! [seconds] [clients per replica] [cross-partition %]` (defaults 3, 2, 2, 16, 10): the clients
//! run for `seconds`, the cluster then gets a second to quiesce; prints the update transactions
//! committed per second and checks that every replica reached the same per-partition digests.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use phasedb_dist::broadcast::BroadcastConfig;
use phasedb_dist::pdur::node::{PdurConfig, PdurNode};
use phasedb_dist::pdur::workload::micro::{MicroConfig, MicroType};
use phasedb_net::Addr;
use phasedb_net::tcp::{TcpOptions, run_blocking};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|a| a.parse().expect("arguments are numbers"))
        .unwrap_or(default)
}

fn main() {
    let replicas = arg(1, 3) as Addr;
    let partitions = arg(2, 2) as usize;
    let seconds = arg(3, 2);
    let clients = arg(4, 16) as usize;
    let cross = arg(5, 10) as f64 / 100.0;
    let cfg = PdurConfig {
        replicas: (0..replicas).collect(),
        micro: MicroConfig {
            ty: MicroType::I,
            items: 100_000,
            partitions,
            cross_partition: cross,
        },
        clients,
        bcast: BroadcastConfig {
            tick_ns: 2_000_000,
            ..BroadcastConfig::default()
        },
        retry_ns: 500_000_000,
        rebroadcast_ns: 1_000_000_000,
        load_until_ns: seconds * 1_000_000_000,
        record_history: false,
        seed: 1,
    };
    let listeners: Vec<TcpListener> = (0..replicas)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
        .collect();
    let peers: Vec<(Addr, SocketAddr)> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as Addr, l.local_addr().expect("bound")))
        .collect();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let me = i as Addr;
            let mut node = PdurNode::new(me, cfg.clone()).expect("valid config");
            let mut opts = TcpOptions::new(me, peers.clone());
            opts.listener = Some(listener);
            opts.tick = Duration::from_millis(1);
            opts.poll = Duration::from_micros(50);
            let rx = stop_rx.clone();
            std::thread::spawn(move || {
                run_blocking(&mut node, opts, rx).expect("the node runs");
                node
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds + 1));
    let _ = stop_tx.send(true);
    let nodes: Vec<PdurNode> = handles
        .into_iter()
        .map(|h| h.join().expect("a node thread"))
        .collect();
    let committed: u64 = nodes.iter().map(|n| n.stats().committed).sum();
    let aborted: u64 = nodes.iter().map(|n| n.stats().aborted).sum();
    println!(
        "{replicas} replicas x {partitions} partitions, {clients} clients each, {:.0}% cross: {} committed/s, {:.1}% aborted",
        cross * 100.0,
        committed / seconds.max(1),
        100.0 * aborted as f64 / (committed + aborted).max(1) as f64
    );
    for n in &nodes {
        println!("replica {}: {:?}", n.me(), n.stats());
    }
    let same = nodes
        .iter()
        .all(|n| n.replica().digests() == nodes[0].replica().digests());
    println!(
        "digests {}",
        if same {
            "equal on every replica"
        } else {
            "DIFFER"
        }
    );
    if !same {
        std::process::exit(1);
    }
}
