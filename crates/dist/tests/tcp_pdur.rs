//! P-DUR replicas over TCP on 127.0.0.1 (`pdur::serve`, what `phasedb node` runs): the threaded
//! replica behind one raft broadcast group per partition. Every replica ends with the same
//! per-partition digests, and the committed history of the cluster (every replica's clients) is
//! serializable.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use phasedb_check::check_serializable;
use phasedb_dist::pdur::serve::{ServeOptions, ServeReport, serve};
use phasedb_dist::pdur::threaded::record_history;
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{ClusterConfig, PdurTable};

fn run_cluster(replicas: usize, table: PdurTable) -> Vec<ServeReport> {
    let listeners: Vec<TcpListener> = (0..replicas)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
        .collect();
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let mut cfg = ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default())
        .expect("a local cluster");
    cfg.pdur = Some(table);
    let cfg = ClusterConfig::from_toml(&cfg.to_toml()).expect("the [pdur] table reads back");
    let done = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let cfg = cfg.clone();
            let done = done.clone();
            let rx = stop_rx.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let on_done: Box<dyn FnOnce() + Send> = Box::new(move || {
                    done.fetch_add(1, Ordering::SeqCst);
                });
                rt.block_on(serve(
                    &cfg,
                    i as u32,
                    Some(l),
                    phasedb_net::tcp::wait_for(rx),
                    ServeOptions {
                        record: true,
                        on_done: Some(on_done),
                        ..ServeOptions::default()
                    },
                ))
                .expect("the replica serves")
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::SeqCst) < replicas {
        assert!(
            Instant::now() < deadline,
            "the replicas did not finish their load"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Followers learn the last commits with the next heartbeat.
    std::thread::sleep(Duration::from_millis(300));
    let _ = stop_tx.send(true);
    handles
        .into_iter()
        .map(|h| h.join().expect("a replica thread"))
        .collect()
}

fn check(reports: &[ServeReport], what: &str) {
    for r in reports {
        assert!(
            r.load.committed() > 20,
            "{what}: replica {} {:?}",
            r.node,
            r.load.by_kind
        );
        assert!(r.measured_ns > 0);
        assert_eq!(r.counters.refused_messages, 0, "{what}");
        assert_eq!(
            r.digests, reports[0].digests,
            "{what}: replica {} differs",
            r.node
        );
    }
    let mut rec = record_history(&reports[0].stopped);
    for r in &reports[1..] {
        for s in &r.stopped {
            for (id, reads) in &s.read_only {
                rec.read_only(*id, reads.clone());
            }
        }
    }
    let h = rec.history(|_| true);
    if let Err(a) = check_serializable(&h) {
        panic!("{what}: not serializable: {a}");
    }
}

fn table(partitions: u32) -> PdurTable {
    PdurTable {
        items: 512,
        cross_partition: 0.3,
        clients_per_partition: 4,
        warmup_ms: 100,
        duration_ms: 400,
        ..PdurTable::new(partitions)
    }
}

#[test]
fn three_pdur_replicas_over_tcp_agree_and_commit_serializably() {
    let reports = run_cluster(3, table(2));
    check(&reports, "P-DUR, 3 replicas x 2 partitions, micro I");
}

#[test]
fn dur_is_one_partition_and_the_twitter_workload_runs_on_p_dur() {
    check(&run_cluster(2, table(1)), "DUR, 2 replicas");
    let twitter = PdurTable {
        workload: "twitter".into(),
        users: 96,
        ..table(2)
    };
    check(
        &run_cluster(2, twitter),
        "P-DUR twitter, 2 replicas x 2 partitions",
    );
}

#[test]
fn a_bad_pdur_table_is_refused_with_its_reason() {
    let addrs: Vec<SocketAddr> = vec!["127.0.0.1:1".parse().unwrap()];
    let mut cfg = ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default())
        .expect("a local cluster");
    for (bad, why) in [
        (
            PdurTable {
                partitions: 0,
                ..table(1)
            },
            "partitions",
        ),
        (
            PdurTable {
                micro_type: "IV".into(),
                ..table(1)
            },
            "micro_type",
        ),
        (
            PdurTable {
                cross_partition: 1.5,
                ..table(1)
            },
            "cross_partition",
        ),
        (
            PdurTable {
                workload: "tpcc".into(),
                ..table(1)
            },
            "workload",
        ),
    ] {
        cfg.pdur = Some(bad);
        let err = ClusterConfig::from_toml(&cfg.to_toml()).expect_err(why);
        assert!(err.to_string().contains(why), "{err}");
    }
}
