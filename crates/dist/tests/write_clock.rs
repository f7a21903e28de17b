//! Write acknowledgements carry the highest timestamp a server holds, so a client that only writes
//! moves its sequence past the writes it was acknowledged after: its next write wins last-writer-wins
//! against them instead of landing below them in the item's history. (The lock baselines learn the
//! newest timestamp from their lock grants already.)

use phasedb_dist::Algorithm;
use phasedb_dist::ramp::client::{ClientSettings, Router, TxnClient};
use phasedb_dist::ramp::msg::{Key, Msg, ReadResult, TxnSpec};
use phasedb_dist::ramp::server::PartitionServer;
use phasedb_net::config::ServerSettings;
use phasedb_net::{Addr, CLIENT_ADDR_BASE, Transport};

const SERVERS: u32 = 2;

/// Messages in flight, delivered in order by [`run`]; `from` is the actor now sending.
struct Wire {
    from: Addr,
    queue: Vec<(Addr, Addr, Msg)>,
}

impl Transport<Msg> for Wire {
    fn now(&self) -> u64 {
        0
    }

    fn send(&mut self, to: Addr, msg: Msg) {
        self.queue.push((self.from, to, msg));
    }
}

/// Runs one write-only transaction of `client` to completion against `servers`.
fn run(client: &mut TxnClient, me: Addr, servers: &mut [PartitionServer], writes: Vec<(Key, u8)>) {
    let mut net = Wire {
        from: me,
        queue: Vec::new(),
    };
    let spec = TxnSpec {
        reads: Vec::new(),
        writes: writes.into_iter().map(|(k, v)| (k, vec![v])).collect(),
    };
    client.start(&mut net, spec);
    for _ in 0..100 {
        for (from, to, msg) in std::mem::take(&mut net.queue) {
            net.from = to;
            if to == me {
                if let Some(outcome) = client.on_reply(&mut net, from, msg) {
                    assert!(outcome.committed, "the write committed");
                    return;
                }
            } else {
                servers[to as usize].handle(&mut net, from, msg);
            }
        }
    }
    panic!("the write did not finish");
}

fn value_at(servers: &[PartitionServer], key: Key) -> Vec<u8> {
    let at = Router::uniform(SERVERS).node_of(key);
    match servers[at as usize].latest(key) {
        ReadResult::Found { value, .. } => value,
        other => panic!("no version of {key}: {other:?}"),
    }
}

#[test]
fn a_write_only_client_overtakes_the_writes_it_was_acknowledged_after() {
    for algorithm in [
        Algorithm::Nwnr,
        Algorithm::RampFast,
        Algorithm::RampSmall,
        Algorithm::RampHybrid,
    ] {
        let mut servers: Vec<PartitionServer> = (0..SERVERS)
            .map(|me| PartitionServer::new(me, ServerSettings::default()))
            .collect();
        let settings = ClientSettings::new(algorithm);
        let (a, b) = (CLIENT_ADDR_BASE, CLIENT_ADDR_BASE + 1);
        let mut busy = TxnClient::new(0, 1, settings, Router::uniform(SERVERS));
        let mut fresh = TxnClient::new(0, 2, settings, Router::uniform(SERVERS));
        for _ in 0..20 {
            run(&mut busy, a, &mut servers, vec![(7, 1), (8, 1)]);
        }
        run(&mut fresh, b, &mut servers, vec![(7, 2), (9, 2)]);
        assert_eq!(
            value_at(&servers, 7),
            vec![1],
            "{algorithm:?}: a first write, with the lowest sequence, loses to later-sequenced ones"
        );
        run(&mut fresh, b, &mut servers, vec![(7, 3), (9, 3)]);
        assert_eq!(
            value_at(&servers, 7),
            vec![3],
            "{algorithm:?}: having been acknowledged after the busy client's writes, the next write wins"
        );
    }
}
