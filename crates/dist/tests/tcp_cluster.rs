//! A real cluster on 127.0.0.1 (nodes on threads of this process): the client library, proxies and
//! the benchmark driver over TCP.

use std::time::Duration;

use phasedb_dist::ramp::bench::workload::YcsbRamp;
use phasedb_dist::ramp::bench::{self, BenchConfig};
use phasedb_dist::ramp::library::{Client, ClientError, ClientOptions};
use phasedb_dist::ramp::msg::{Algorithm, TxnSpec};
use phasedb_dist::ramp::node::LocalCluster;
use phasedb_net::ClusterConfig;
use phasedb_net::config::{NetSettings, ServerSettings};

fn cluster(n: usize) -> (ClusterConfig, LocalCluster) {
    let ports = bench::launch::reserve_ports(n).unwrap();
    let addrs = bench::launch::addrs_of(&ports).unwrap();
    let cfg =
        ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default()).unwrap();
    let nodes = LocalCluster::start_on(&cfg, ports).unwrap();
    (cfg, nodes)
}

#[test]
fn the_client_library_writes_and_reads_atomically_directly_and_through_a_proxy() {
    let (cfg, nodes) = cluster(2);
    for algorithm in [
        Algorithm::RampFast,
        Algorithm::RampSmall,
        Algorithm::RampHybrid,
        Algorithm::Lwlr,
        Algorithm::Epci,
    ] {
        let client = Client::connect(&cfg, ClientOptions::new(algorithm)).unwrap();
        let base = 1000 * (algorithm as u64 + 1);
        let keys: Vec<u64> = (base..base + 8).collect();
        let ts = client
            .put_all(keys.iter().map(|&k| (k, vec![k as u8])).collect())
            .unwrap();
        let got = client.get_all(&keys).unwrap();
        assert_eq!(got.len(), 8);
        for (r, k) in got.iter().zip(&keys) {
            assert_eq!(
                (r.key, r.value.clone()),
                (*k, vec![*k as u8]),
                "{}",
                algorithm.name()
            );
            if algorithm != Algorithm::Lwlr {
                assert_eq!(r.ts, ts);
            }
        }
        let via = client
            .run_via(
                1,
                TxnSpec {
                    reads: keys.clone(),
                    writes: vec![],
                },
            )
            .unwrap();
        assert_eq!(
            via.reads
                .iter()
                .map(|r| r.value.clone())
                .collect::<Vec<_>>(),
            got.iter().map(|r| r.value.clone()).collect::<Vec<_>>()
        );
        let (read, _) = client
            .read_write(&keys[..2], |vals| {
                vals.iter().map(|v| (v.key, vec![v.value[0] + 1])).collect()
            })
            .unwrap();
        assert_eq!(read.len(), 2);
        let after = client.get_all(&keys[..2]).unwrap();
        assert_eq!(after[0].value, vec![keys[0] as u8 + 1]);
        let err = client
            .run(TxnSpec {
                reads: vec![1, 1],
                writes: vec![],
            })
            .unwrap_err();
        assert!(matches!(err, ClientError::Invalid(_)), "{err}");
        let err = client
            .run_via(
                9,
                TxnSpec {
                    reads: vec![1],
                    writes: vec![],
                },
            )
            .unwrap_err();
        assert!(err.to_string().contains("no node 9"));
    }
    let stats = nodes.stop();
    assert!(stats.iter().all(|s| s.is_ok()), "nodes shut down cleanly");
}

#[test]
fn a_node_serves_only_on_a_socket_at_its_own_address() {
    let ports = bench::launch::reserve_ports(2).unwrap();
    let addrs = bench::launch::addrs_of(&ports).unwrap();
    let cfg = ClusterConfig::local(
        &addrs[..1],
        ServerSettings::default(),
        NetSettings::default(),
    )
    .unwrap();
    let mut ports = ports.into_iter();
    let (own, other) = (ports.next().unwrap(), ports.next().unwrap());
    let stats = LocalCluster::start_on(&cfg, vec![other]).unwrap().stop();
    let err = stats[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "the listening socket is at {}, but the cluster file puts node 0 at {}",
            addrs[1], addrs[0]
        )),
        "{err}"
    );
    let err = LocalCluster::start_on(&cfg, vec![]).err().unwrap();
    assert!(
        err.to_string().contains("0 listening sockets for 1 nodes"),
        "{err}"
    );
    // `own` still holds node 0's port: a node that binds it fails at once.
    let err = LocalCluster::start(&cfg).err().unwrap();
    assert!(
        err.to_string()
            .contains(&format!("node 0 cannot bind {}", addrs[0])),
        "{err}"
    );
    drop(own);
    let stats = LocalCluster::start(&cfg).unwrap().stop();
    assert!(stats[0].is_ok(), "{:?}", stats[0].as_ref().err());
}

#[test]
fn connecting_to_a_cluster_that_is_not_running_names_the_node() {
    let addrs = bench::launch::free_addrs(1).unwrap();
    let cfg =
        ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default()).unwrap();
    let err = Client::connect(&cfg, ClientOptions::new(Algorithm::RampFast))
        .err()
        .unwrap();
    assert!(err.to_string().contains("cannot reach node 0"), "{err}");
}

#[test]
fn the_benchmark_driver_runs_every_algorithm_and_ramp_histories_are_read_atomic() {
    for algorithm in Algorithm::ALL {
        let (cfg, nodes) = cluster(2);
        let b = BenchConfig {
            algorithm,
            clients: 16,
            threads: 1,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(400),
            seed: 3,
            workload: YcsbRamp {
                items: 200,
                read_ratio: 0.7,
                ..YcsbRamp::default()
            },
            bloom_bits: 256,
            bloom_hashes: 4,
            verify: algorithm.is_read_atomic(),
            skip_commit: 0.0,
            pin: false,
        };
        let report = bench::run(&cfg, &b, |_, _| {}).unwrap();
        let total = report.stats.total();
        // Progress, not speed: on a loaded 2-core machine LWNR committed 88 in this window.
        assert!(
            total.committed > 20,
            "{}: {} committed",
            algorithm.name(),
            total.committed
        );
        assert!(report.stats.read.committed > 0 && report.stats.write.committed > 0);
        if let Some(v) = &report.verified {
            assert!(v.is_ok(), "{}: {:?}", algorithm.name(), v);
        }
        if algorithm == Algorithm::RampSmall {
            assert_eq!(
                report.stats.read.two_round_reads, report.stats.read.committed,
                "RAMP-S always takes two rounds"
            );
        }
        drop(nodes);
    }
}
