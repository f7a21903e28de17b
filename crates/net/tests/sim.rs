//! The simulator: deterministic from its seed, with delays, drops, partitions and crashes.

use phasedb_net::sim::{SimConfig, Simulator};
use phasedb_net::{Addr, Node, Transport};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Ping(u64);

/// Pings its peer every tick and records what arrives; a crash forgets what arrived.
struct Pinger {
    peer: Addr,
    sent: u64,
    got: Vec<u64>,
}

impl Node for Pinger {
    type Msg = Ping;
    fn on_message<T: Transport<Ping>>(&mut self, _: &mut T, _: Addr, msg: Ping) {
        self.got.push(msg.0);
    }
    fn on_tick<T: Transport<Ping>>(&mut self, net: &mut T) {
        for _ in 0..3 {
            self.sent += 1;
            net.send(self.peer, Ping(self.sent));
        }
    }
    fn on_crash(&mut self) {
        self.got.clear();
    }
}

fn sim(cfg: SimConfig) -> Simulator<Pinger> {
    let mut s = Simulator::new(cfg);
    s.add(
        0,
        Pinger {
            peer: 1,
            sent: 0,
            got: vec![],
        },
    );
    s.add(
        1,
        Pinger {
            peer: 0,
            sent: 0,
            got: vec![],
        },
    );
    s
}

#[test]
fn the_same_seed_replays_the_same_run_and_another_seed_differs() {
    let run = |seed| {
        let mut s = sim(SimConfig {
            drop_rate: 0.1,
            ..SimConfig::new(seed)
        });
        s.run_until(50_000_000);
        (s.trace_hash(), s.node(1).got.clone(), s.stats())
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a.0, run(8).0);
    assert!(a.2.dropped > 0 && a.2.delivered > 0);
}

#[test]
fn random_delays_reorder_messages() {
    let mut s = sim(SimConfig::new(3));
    s.run_until(100_000_000);
    let got = &s.node(1).got;
    assert!(got.len() > 200);
    assert!(
        got.windows(2).any(|w| w[0] > w[1]),
        "delays 50-500us with 3 sends per tick reorder"
    );
}

#[test]
fn partitions_cut_both_ways_until_healed() {
    let mut s = sim(SimConfig::new(1));
    s.run_until(10_000_000);
    s.partition(&[0], &[1]);
    s.run_until(11_000_000);
    let (a, b) = (s.node(0).got.len(), s.node(1).got.len());
    s.run_until(30_000_000);
    assert_eq!((s.node(0).got.len(), s.node(1).got.len()), (a, b));
    s.heal();
    s.run_until(40_000_000);
    assert!(s.node(0).got.len() > a && s.node(1).got.len() > b);
}

#[test]
fn a_crashed_node_loses_volatile_state_and_messages_until_restarted() {
    let mut s = sim(SimConfig::new(5));
    s.run_until(10_000_000);
    s.crash(1);
    assert!(!s.is_up(1));
    assert!(s.node(1).got.is_empty());
    let sent_by_1 = s.node(1).sent;
    s.run_until(20_000_000);
    assert!(s.node(1).got.is_empty(), "a dead node receives nothing");
    assert_eq!(s.node(1).sent, sent_by_1, "a dead node does not tick");
    s.restart(1);
    s.run_until(30_000_000);
    assert!(!s.node(1).got.is_empty());
    assert!(s.node(1).sent > sent_by_1);
}

#[test]
fn a_drop_filter_loses_exactly_the_chosen_messages() {
    let mut s = sim(SimConfig::new(9));
    s.set_drop_filter(Some(Box::new(|_, to, m: &Ping| {
        to == 1 && m.0.is_multiple_of(2)
    })));
    s.run_until(20_000_000);
    let got = &s.node(1).got;
    assert!(!got.is_empty());
    assert!(got.iter().all(|n| n % 2 == 1));
    assert!(s.node(0).got.iter().any(|n| n % 2 == 0));
}
