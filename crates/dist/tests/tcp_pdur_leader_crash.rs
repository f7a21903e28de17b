//! A broadcast group's leader crashes during a run of three P-DUR replicas over TCP: the
//! survivors elect another, propose again what was lost with the old leader (their clients
//! would otherwise wait for ever and the run never drain), and keep every transaction the
//! crashed replica saw commit; the survivors' digests agree and their history is serializable.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use phasedb_check::check_serializable;
use phasedb_dist::pdur::serve::{Probe, ServeOptions, ServeReport, serve};
use phasedb_dist::pdur::threaded::record_history;
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{ClusterConfig, PdurTable};

#[test]
fn a_crashed_group_leader_loses_no_committed_transaction_and_blocks_no_client() {
    let n = 3;
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
        .collect();
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let mut cfg = ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default())
        .expect("a local cluster");
    cfg.pdur = Some(PdurTable {
        items: 512,
        cross_partition: 0.3,
        clients_per_partition: 4,
        warmup_ms: 100,
        duration_ms: 2500,
        ..PdurTable::new(2)
    });
    let done = Arc::new(AtomicUsize::new(0));
    let probes: Vec<Arc<Probe>> = (0..n).map(|_| Arc::default()).collect();
    let mut stops = Vec::new();
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let (cfg, done, probe) = (cfg.clone(), done.clone(), probes[i].clone());
            let (tx, rx) = tokio::sync::watch::channel(false);
            stops.push(tx);
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
                        probe: Some(probe),
                        ..ServeOptions::default()
                    },
                ))
                .expect("the replica serves")
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader_of_0 = loop {
        let leads: Vec<u64> = probes
            .iter()
            .map(|p| p.leads.load(Ordering::Acquire))
            .collect();
        if leads.iter().fold(0, |m, l| m | l) == 0b11 {
            break leads
                .iter()
                .position(|l| l & 1 != 0)
                .expect("a leader of group 0");
        }
        assert!(Instant::now() < deadline, "no leaders elected");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(600));
    let _ = stops[leader_of_0].send(true);
    let mut handles: Vec<Option<_>> = handles.into_iter().map(Some).collect();
    let crashed: ServeReport = handles[leader_of_0]
        .take()
        .unwrap()
        .join()
        .expect("the crashed replica's thread");
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::SeqCst) < n - 1 {
        assert!(
            Instant::now() < deadline,
            "the survivors' clients never finished: a lost proposal was not proposed again"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    for (i, s) in stops.iter().enumerate() {
        if i != leader_of_0 {
            let _ = s.send(true);
        }
    }
    let survivors: Vec<ServeReport> = handles
        .into_iter()
        .flatten()
        .map(|h| h.join().expect("a survivor's thread"))
        .collect();
    assert!(
        crashed.load.committed() > 0,
        "the crash came before any load"
    );
    for r in &survivors {
        assert!(
            r.load.committed() > 20,
            "replica {} {:?}",
            r.node,
            r.load.by_kind
        );
        assert_eq!(
            r.digests, survivors[0].digests,
            "replica {} differs",
            r.node
        );
    }
    let reproposed: u64 = survivors.iter().map(|r| r.counters.reproposed).sum();
    assert!(reproposed > 0, "no proposal was lost with the leader");
    let committed_at = |r: &ServeReport| -> HashSet<_> {
        r.stopped
            .iter()
            .flat_map(|s| s.decisions.iter())
            .filter(|d| d.outcome.is_ok())
            .map(|d| (d.txn, d.partition))
            .collect()
    };
    let kept = committed_at(&survivors[0]);
    let lost: Vec<_> = committed_at(&crashed).difference(&kept).copied().collect();
    assert!(
        lost.is_empty(),
        "committed at the crashed replica, lost: {lost:?}"
    );
    let mut rec = record_history(&survivors[0].stopped);
    for s in survivors[1].stopped.iter().chain(&crashed.stopped) {
        for (id, reads) in &s.read_only {
            rec.read_only(*id, reads.clone());
        }
    }
    if let Err(a) = check_serializable(&rec.history(|_| true)) {
        panic!("not serializable: {a}");
    }
}
