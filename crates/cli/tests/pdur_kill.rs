//! A real P-DUR replica process is killed with SIGKILL during a run of three replicas, then
//! restarted on the same cluster file with `--rejoin`: no write a client was told committed
//! (through the killed replica's client endpoint) is lost, the replicas' per-partition digests
//! agree once the load is over, the rejoined replica among them (it caught up by the groups'
//! snapshots and logs), a client of the rejoined replica's endpoint is served once it caught up,
//! and the committed history is serializable. Two replicas run in this
//! process (their history recorded); the killed one is a `phasedb node` child.

use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use phasedb_check::check_serializable;
use phasedb_dist::pdur::endpoint::wire::{self, Reply, Request};
use phasedb_dist::pdur::serve::{ServeOptions, ServeReport, serve};
use phasedb_dist::pdur::threaded::record_history;
use phasedb_net::config::{NetSettings, ServerSettings};
use phasedb_net::{ClusterConfig, PdurTable};

const VICTIM: u32 = 2;
/// Keys the test's client writes, above the workload's items so nothing else overwrites them.
const FIRST_KEY: u64 = 1 << 20;
/// Keys the client of the rejoined replica writes.
const REJOINED_KEY: u64 = 1 << 21;

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a loopback port")
}

fn start_victim(file: &Path, stats: &Path, rejoin: bool) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_phasedb"));
    cmd.arg("node")
        .arg("--config")
        .arg(file)
        .args(["--id", &VICTIM.to_string(), "--quiet", "--stats"])
        .arg(stats);
    if rejoin {
        cmd.arg("--rejoin");
    }
    cmd.spawn().expect("phasedb node starts")
}

/// Commits one blind write after another through the endpoint at `addr` (key `first + i`,
/// value `i`) until the connection fails, no answer comes within `patience`, or `until`; returns
/// the writes it was told committed and counts them in `progress` as they come.
fn write_until_failure(
    addr: SocketAddr,
    first: u64,
    patience: Duration,
    until: Instant,
    progress: &AtomicUsize,
) -> Vec<(u64, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) => {
                assert!(Instant::now() < deadline, "no endpoint at {addr}: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    stream.set_read_timeout(Some(patience)).unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = BufWriter::new(stream);
    let (mut buf, mut scratch) = (Vec::new(), Vec::new());
    let mut acked = Vec::new();
    let mut i = 0u64;
    while Instant::now() < until {
        let write = (first + i, i.to_le_bytes().to_vec());
        let sent = wire::write(
            &mut w,
            &Request::Commit {
                tag: 0,
                writes: vec![write.clone()],
            },
            &mut scratch,
        )
        .and_then(|_| w.flush());
        if sent.is_err() {
            break;
        }
        match wire::read::<Reply>(&mut r, &mut buf) {
            Ok(Reply::Outcome {
                committed: true, ..
            }) => {
                acked.push(write);
                progress.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Reply::Outcome { .. }) => {}
            Ok(other) => panic!("unexpected reply {other:?}"),
            Err(_) => break,
        }
        i += 1;
    }
    acked
}

/// The `name value` lines of a node's counters file.
fn stats_of(path: &Path) -> std::collections::HashMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn a_sigkilled_replica_loses_no_acknowledged_commit_and_rejoins_by_state_transfer() {
    let dir = std::env::temp_dir().join(format!("phasedb-pdur-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, stats) = (dir.join("cluster.toml"), dir.join("victim.stats"));
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let mut cfg = ClusterConfig::local(&addrs, ServerSettings::default(), NetSettings::default())
        .expect("a local cluster");
    cfg.pdur = Some(PdurTable {
        items: 512,
        cross_partition: 0.3,
        clients_per_partition: 2,
        client_addrs: (0..3).map(|_| free_addr()).collect(),
        warmup_ms: 100,
        duration_ms: 2500,
        snapshot_entries: 32,
        ..PdurTable::new(2)
    });
    std::fs::write(&file, cfg.to_toml()).unwrap();
    let victim_endpoint = cfg.pdur.as_ref().unwrap().client_addrs[VICTIM as usize];
    let done = Arc::new(AtomicUsize::new(0));
    let mut stops = Vec::new();
    let survivors: Vec<_> = (0..2u32)
        .map(|i| {
            let (cfg, done) = (cfg.clone(), done.clone());
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
                let opts = ServeOptions {
                    record: true,
                    on_done: Some(on_done),
                    ..ServeOptions::default()
                };
                rt.block_on(serve(&cfg, i, None, phasedb_net::tcp::wait_for(rx), opts))
                    .expect("the replica serves")
            })
        })
        .collect();
    let mut victim = start_victim(&file, &stats, false);
    let progress = Arc::new(AtomicUsize::new(0));
    let client = {
        let progress = progress.clone();
        std::thread::spawn(move || {
            write_until_failure(
                victim_endpoint,
                FIRST_KEY,
                Duration::from_secs(5),
                Instant::now() + Duration::from_secs(20),
                &progress,
            )
        })
    };
    // Kill once the victim has acknowledged some writes (its start-up may be slow on a busy
    // machine), and at most 10 s in.
    let kill_by = Instant::now() + Duration::from_secs(10);
    std::thread::sleep(Duration::from_millis(1000));
    while progress.load(Ordering::Relaxed) < 200 && Instant::now() < kill_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.kill().expect("SIGKILL");
    victim.wait().unwrap();
    let acked = client.join().expect("the client");
    assert!(
        acked.len() > 5,
        "only {} writes committed before the kill",
        acked.len()
    );
    std::thread::sleep(Duration::from_millis(500));
    let marker = {
        let mut s = stats.as_os_str().to_owned();
        s.push(".done");
        std::path::PathBuf::from(s)
    };
    // A victim slow to be killed may have finished its first life's load: only the rejoined
    // life's marker counts.
    let _ = std::fs::remove_file(&marker);
    let mut victim = start_victim(&file, &stats, true);
    // A client of the rejoined replica: its endpoint serves once the replica caught up, and
    // answers every transaction.
    let rejoined_client = std::thread::spawn(move || {
        write_until_failure(
            victim_endpoint,
            REJOINED_KEY,
            Duration::from_secs(30),
            Instant::now() + Duration::from_secs(2),
            &AtomicUsize::new(0),
        )
    });
    let deadline = Instant::now() + Duration::from_secs(40);
    while done.load(Ordering::SeqCst) < 2 || !marker.exists() {
        if Instant::now() > deadline {
            // SIGTERM makes the rejoined replica write its counters: what it got stuck on.
            let _ = Command::new("kill")
                .args(["-TERM", &victim.id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(3));
            let _ = victim.kill();
            panic!(
                "the load did not finish: {} survivors done, rejoined replica done: {}; its \
                 counters: {:?}",
                done.load(Ordering::SeqCst),
                marker.exists(),
                std::fs::read_to_string(&stats).unwrap_or_default()
            );
        }
        if let Some(status) = victim.try_wait().unwrap() {
            panic!("the rejoined replica exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let rejoined_acked = rejoined_client
        .join()
        .expect("the rejoined replica's client");
    assert!(
        !rejoined_acked.is_empty(),
        "the rejoined replica's endpoint committed nothing"
    );
    // Followers learn the last commits with the next heartbeat.
    std::thread::sleep(Duration::from_millis(300));
    let term = Command::new("kill")
        .args(["-TERM", &victim.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(term.success(), "SIGTERM to the rejoined replica");
    let status = victim.wait().unwrap();
    for s in &stops {
        let _ = s.send(true);
    }
    let mut reports: Vec<ServeReport> = survivors
        .into_iter()
        .map(|h| h.join().expect("a survivor"))
        .collect();
    assert!(
        status.success(),
        "the rejoined replica stopped with {status}"
    );
    let rejoined = stats_of(&stats);
    assert!(
        rejoined["restores"] >= 1,
        "the rejoined replica restored no partition from a snapshot: {rejoined:?}"
    );
    assert!(rejoined["committed"] > 0, "{rejoined:?}");
    for r in &reports {
        assert_eq!(r.digests, reports[0].digests, "replica {} differs", r.node);
        assert!(
            r.load.committed() > 20,
            "replica {}: {:?}",
            r.node,
            r.load.by_kind
        );
    }
    let digests: Vec<u64> = (0..2).map(|p| rejoined[&format!("digest.{p}")]).collect();
    assert_eq!(
        digests, reports[0].digests,
        "the rejoined replica differs from the survivors"
    );
    for r in &mut reports {
        for (key, value) in acked.iter().chain(&rejoined_acked) {
            let p = (key % 2) as usize;
            let got = r.stopped[p].partition.read(*key, None).expect("readable");
            assert_eq!(
                got.value.as_ref(),
                Some(value),
                "replica {}: acknowledged write of key {key} lost",
                r.node
            );
        }
    }
    eprintln!(
        "{} writes acknowledged before the kill, {} by the rejoined replica; rejoined replica: {} partitions restored, {} \
         committed; survivors committed {:?}, finished {:?} partial broadcasts",
        acked.len(),
        rejoined_acked.len(),
        rejoined["restores"],
        rejoined["committed"],
        reports
            .iter()
            .map(|r| r.load.committed())
            .collect::<Vec<_>>(),
        reports
            .iter()
            .map(|r| r.counters.rebroadcasts)
            .collect::<Vec<_>>()
    );
    if let Err(a) = check_serializable(&record_history(&reports[0].stopped).history(|_| true)) {
        panic!("not serializable: {a}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
