//! A P-DUR replica's client endpoint (clients over TCP, Algorithm 3 executed remotely): clients
//! read and commit through one connection whatever partitions they touch, a remote closed-loop
//! load commits the micro-benchmark, and a client that disappears mid-transaction leaves no
//! snapshot in use and no transaction waiting behind it.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use phasedb_dist::pdur::endpoint::Endpoint;
use phasedb_dist::pdur::endpoint::remote::{self, RemoteLoad};
use phasedb_dist::pdur::endpoint::wire::{self, Reply, Request};
use phasedb_dist::pdur::threaded::ThreadedReplica;
use phasedb_dist::pdur::workload::Generator;
use phasedb_dist::pdur::workload::micro::{MicroConfig, MicroGen, MicroType};

const ITEMS: u64 = 2_000;

fn micro(partitions: usize, cross: f64) -> MicroConfig {
    MicroConfig {
        ty: MicroType::I,
        items: ITEMS,
        partitions,
        cross_partition: cross,
    }
}

fn replica(partitions: usize) -> (ThreadedReplica, Endpoint) {
    let cfg = micro(partitions, 0.0);
    let mut r = ThreadedReplica::start(
        partitions,
        move |p, put| {
            cfg.load(|k, v| {
                if k % partitions as u64 == u64::from(p) {
                    put(k, v)
                }
            })
        },
        None,
        false,
    );
    let decisions = r.take_decisions();
    let l = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let e = Endpoint::start(l, r.handle(), decisions).expect("the endpoint starts");
    (r, e)
}

fn send(s: &mut TcpStream, req: &Request) {
    let mut buf = Vec::new();
    wire::encode(req, &mut buf);
    s.write_all(&buf).expect("send");
}

fn recv(r: &mut BufReader<TcpStream>) -> Reply {
    let mut buf = Vec::new();
    wire::read(r, &mut buf).expect("a reply")
}

fn wait_closed(e: &Endpoint) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.stats().open > 0 {
        assert!(Instant::now() < deadline, "a session stayed open");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn one_endpoint_serves_reads_of_every_partition_and_commits_updates() {
    let (r, e) = replica(2);
    let mut s = TcpStream::connect(e.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rd = BufReader::new(s.try_clone().unwrap());
    // Keys 4 and 7 live on partitions 0 and 1.
    send(
        &mut s,
        &Request::Read {
            tag: 0,
            keys: vec![4, 7],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Values {
            tag: 0,
            values: vec![
                Some(4u32.to_le_bytes().to_vec()),
                Some(7u32.to_le_bytes().to_vec())
            ]
        }
    );
    send(
        &mut s,
        &Request::Commit {
            tag: 0,
            writes: vec![(4, vec![1; 4]), (7, vec![2; 4])],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Outcome {
            tag: 0,
            committed: true
        }
    );
    // A concurrent writer of key 4 that read before the commit is aborted by certification.
    send(
        &mut s,
        &Request::Read {
            tag: 1,
            keys: vec![4],
        },
    );
    assert!(matches!(recv(&mut rd), Reply::Values { tag: 1, .. }));
    send(
        &mut s,
        &Request::Read {
            tag: 2,
            keys: vec![4, 7],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Values {
            tag: 2,
            values: vec![Some(vec![1; 4]), Some(vec![2; 4])]
        }
    );
    send(
        &mut s,
        &Request::Commit {
            tag: 1,
            writes: vec![(4, vec![3; 4])],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Outcome {
            tag: 1,
            committed: true
        }
    );
    send(
        &mut s,
        &Request::Commit {
            tag: 2,
            writes: vec![(4, vec![5; 4])],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Outcome {
            tag: 2,
            committed: false
        }
    );
    // A read-only transaction across both partitions commits without broadcast.
    send(
        &mut s,
        &Request::Read {
            tag: 3,
            keys: vec![4, 7],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Values {
            tag: 3,
            values: vec![Some(vec![3; 4]), Some(vec![2; 4])]
        }
    );
    send(
        &mut s,
        &Request::Commit {
            tag: 3,
            writes: vec![],
        },
    );
    assert_eq!(
        recv(&mut rd),
        Reply::Outcome {
            tag: 3,
            committed: true
        }
    );
    // Breaking the protocol closes the connection with a reason.
    send(
        &mut s,
        &Request::Read {
            tag: 200,
            keys: vec![1],
        },
    );
    assert!(matches!(recv(&mut rd), Reply::Refused(_)));
    drop((s, rd));
    wait_closed(&e);
    assert_eq!(e.stats().refused, 1);
    e.stop();
    r.quiesce();
    for s in r.stop() {
        assert_eq!(s.partition.snapshots_in_use(), 0);
    }
}

#[test]
fn a_client_that_disappears_mid_transaction_leaves_nothing_behind() {
    let (r, e) = replica(2);
    for round in 0..20u64 {
        let mut s = TcpStream::connect(e.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut rd = BufReader::new(s.try_clone().unwrap());
        // Open transactions in every phase, then vanish: updates being certified, a
        // cross-partition read-only commit being checked, reads answered, reads in flight.
        let key = |tag: u8| round * 40 + u64::from(tag) * 4;
        for tag in 0..6u8 {
            send(
                &mut s,
                &Request::Read {
                    tag,
                    keys: vec![key(tag), key(tag) + 1],
                },
            );
        }
        for _ in 0..6 {
            assert!(matches!(recv(&mut rd), Reply::Values { .. }));
        }
        for tag in 0..3u8 {
            send(
                &mut s,
                &Request::Commit {
                    tag,
                    writes: vec![(key(tag), vec![9; 4])],
                },
            );
        }
        send(
            &mut s,
            &Request::Commit {
                tag: 3,
                writes: vec![],
            },
        );
        for tag in 6..12u8 {
            send(
                &mut s,
                &Request::Read {
                    tag,
                    keys: vec![key(tag), key(tag) + 1],
                },
            );
        }
        s.flush().unwrap();
        if round % 2 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop((s, rd));
    }
    wait_closed(&e);
    assert_eq!(e.stats().sessions, 20);
    assert_eq!(e.stats().refused, 0);
    e.stop();
    r.quiesce();
    for s in r.stop() {
        assert_eq!(
            s.partition.snapshots_in_use(),
            0,
            "partition {} keeps snapshots of vanished clients",
            s.partition.id()
        );
        assert_eq!(s.partition.undecided(), 0);
    }
}

#[test]
fn a_remote_load_commits_over_tcp_and_counts_its_window() {
    let (r, e) = replica(2);
    let generators: Vec<Box<dyn Generator + Send>> = (0..2)
        .map(|p| Box::new(MicroGen::new(micro(2, 0.2), 7 + p)) as Box<dyn Generator + Send>)
        .collect();
    let report = remote::run(RemoteLoad {
        addr: e.addr(),
        partitions: 2,
        generators,
        inflight: 8,
        warmup: Duration::from_millis(100),
        duration: Duration::from_millis(500),
        progress: None,
        watch: None,
    })
    .expect("the load runs");
    let committed = report.load.committed();
    assert!(committed > 50, "only {committed} committed over TCP");
    assert!(report.measured >= Duration::from_millis(400));
    wait_closed(&e);
    e.stop();
    r.quiesce();
    let stopped = r.stop();
    let certified: u64 = stopped.iter().map(|s| s.partition.stats().committed).sum();
    assert!(
        certified >= committed,
        "{certified} certified < {committed} counted"
    );
    for s in &stopped {
        assert_eq!(s.partition.snapshots_in_use(), 0);
    }
}
