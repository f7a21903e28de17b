//! The Calvin cluster benchmark, on the pieces of STAR's ([`crate::star::bench`]): the sequencer
//! draws the load (as STAR's nodes do theirs), the benchmark reads every node's counters each
//! interval over TCP, then stops the load, waits until every node ran every batch the sequencer
//! cut, and compares each partition's copies across the replica groups and runs the workload's
//! check on every node.
//!
//! Every group runs every transaction; a transaction is counted by its home partition's owner in
//! each group, so the run's throughput is that of the slowest group (its nodes' counters form the
//! window; the intervals are every node's commits divided by the groups).

use std::time::{Duration, Instant};

use phasedb_net::{Addr, ClusterConfig};

use crate::calvin::groups::Groups;
use crate::ramp::bench::faults::{Faults, Timeline};
use crate::star::bench::{BenchReport, BenchSettings, Progress, ReplicaCheck, Stage, since};
use crate::star::client::{Client, ClientError};
use crate::star::msg::{Answer, Query};
use crate::star::stats::StarStats;

fn stats_of(answer: Result<Answer, ClientError>, node: Addr) -> Result<StarStats, String> {
    match answer {
        Ok(Answer::Stats(s)) => Ok(*s),
        Ok(other) => Err(format!(
            "node {node} answered {other:?} to a counters query"
        )),
        Err(e) => Err(format!("node {node}: {e}")),
    }
}

fn read_all(client: &Client, query: Query) -> Result<Vec<StarStats>, String> {
    client
        .query_all(query)
        .into_iter()
        .zip(0..)
        .map(|(a, n)| stats_of(a, n))
        .collect()
}

/// Compares the digests `answers[n]` node `n` gave of the partitions it owns: each partition has
/// one owner per group, and all must agree.
pub fn compare_groups(groups: &Groups, answers: &[Vec<(u32, u64)>]) -> ReplicaCheck {
    let mut check = ReplicaCheck::default();
    for p in 0..groups.partitions() {
        let mut seen = Vec::new();
        for g in 0..groups.groups() {
            let n = groups.owner(g, p);
            match answers
                .get(n as usize)
                .and_then(|a| a.iter().find(|d| d.0 == p))
            {
                Some(&(_, d)) => seen.push((n, d)),
                None => check.problems.push(format!(
                    "node {n} owns partition {p} but gave no digest of it"
                )),
            }
        }
        if let Some(&(first, d0)) = seen.first()
            && let Some(&(other, d)) = seen.iter().find(|s| s.1 != d0)
        {
            check.problems.push(format!(
                "partition {p}: node {first} has digest {d0:016x}, node {other} {d:016x}"
            ));
        }
        check.partitions.push((p, seen));
    }
    check
}

/// Runs the benchmark on the Calvin cluster `cfg`, whose nodes serve already with the load off.
/// `watch` sees the progress about every interval; an error it returns ends the run.
pub fn run(
    cfg: &ClusterConfig,
    settings: &BenchSettings,
    mut watch: impl FnMut(&Progress) -> Result<(), String>,
) -> Result<BenchReport, String> {
    if settings.duration.is_zero() || settings.interval.is_zero() {
        return Err("the measured window and the interval must be positive".into());
    }
    let groups = Groups::from_cluster(cfg).map_err(|e| e.to_string())?;
    let client = Client::connect(cfg).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + settings.ready_timeout;
    for node in 0..client.nodes() {
        let ticket = client
            .send_query(node, Query::Stats)
            .map_err(|e| e.to_string())?;
        loop {
            watch(&Progress {
                stage: Stage::Loading,
                elapsed: Duration::ZERO,
                rate: 0.0,
            })?;
            match ticket.poll(Duration::from_millis(100)) {
                Some(answer) => {
                    stats_of(answer, node)?;
                    break;
                }
                None if Instant::now() >= deadline => {
                    return Err(format!(
                        "node {node} did not answer within {:?} of the start (still loading?)",
                        settings.ready_timeout
                    ));
                }
                None => {}
            }
        }
    }
    let per_group = groups.groups() as f64;
    read_all(&client, Query::Load(true))?;
    let load_start = Instant::now();
    let total = |s: &[StarStats]| s.iter().map(StarStats::committed).sum::<u64>();
    let mut last = (load_start, 0u64);
    let mut samples = vec![(Duration::ZERO, 0u64)];
    let mut sample = |stage: Stage, watch: &mut dyn FnMut(&Progress) -> Result<(), String>| {
        let at = Instant::now();
        let stats = read_all(&client, Query::Stats)?;
        let committed = total(&stats);
        samples.push((
            at.duration_since(load_start),
            (committed as f64 / per_group) as u64,
        ));
        let rate = (committed - last.1.min(committed)) as f64
            / per_group
            / at.duration_since(last.0).as_secs_f64().max(1e-9);
        last = (at, committed);
        watch(&Progress {
            stage,
            elapsed: load_start.elapsed(),
            rate,
        })?;
        Ok::<_, String>((at, stats, rate))
    };
    while load_start.elapsed() < settings.warmup {
        std::thread::sleep(
            settings
                .interval
                .min(settings.warmup.saturating_sub(load_start.elapsed())),
        );
        sample(Stage::Warmup, &mut watch)?;
    }
    let (first_at, first, _) = sample(Stage::Measuring, &mut watch)?;
    let mut intervals = Vec::new();
    let mut next = first_at;
    let (last_at, end) = loop {
        next += settings.interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let (at, stats, rate) = sample(Stage::Measuring, &mut watch)?;
        intervals.push(rate);
        if at.duration_since(first_at) >= settings.duration {
            break (at, stats);
        }
    };
    let measured = last_at.duration_since(first_at);
    let timeline = Timeline::from_samples(settings.interval, &samples);

    let stopped = read_all(&client, Query::Load(false))?;
    let cut = stopped[groups.sequencer() as usize].times.phases;
    let deadline = Instant::now() + settings.quiesce_timeout;
    let settled = loop {
        let stats = read_all(&client, Query::Stats)?;
        if stats.iter().all(|s| s.phase >= cut && s.idle) {
            break stats;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "batch {cut}, the last with load, did not finish everywhere within {:?}",
                settings.quiesce_timeout
            ));
        }
        watch(&Progress {
            stage: Stage::Quiescing,
            elapsed: load_start.elapsed(),
            rate: 0.0,
        })?;
        std::thread::sleep(Duration::from_millis(5));
    };
    let digests = client
        .query_all(Query::Digests)
        .into_iter()
        .zip(0..)
        .map(|(a, n)| match a {
            Ok(Answer::Digests(d)) => Ok(d.iter().map(|d| (d.partition, d.digest)).collect()),
            Ok(other) => Err(format!("node {n} answered {other:?} to a digests query")),
            Err(e) => Err(format!("node {n}: {e}")),
        })
        .collect::<Result<Vec<Vec<_>>, String>>()?;
    let replicas = compare_groups(&groups, &digests);
    let checks = client
        .query_all(Query::Check)
        .into_iter()
        .zip(0..)
        .map(|(a, n)| match a {
            Ok(Answer::Check(verdict)) => verdict,
            Ok(other) => Err(format!("node {n} answered {other:?} to a check")),
            Err(e) => Err(format!("node {n}: {e}")),
        })
        .collect();

    let deltas: Vec<StarStats> = end.iter().zip(&first).map(|(e, s)| since(e, s)).collect();
    let slowest = (0..groups.groups())
        .min_by_key(|&g| {
            groups
                .members(g)
                .map(|n| deltas[n as usize].committed())
                .sum::<u64>()
        })
        .expect("at least one group");
    let mut window = StarStats::default();
    for n in groups.members(slowest) {
        window.merge(&deltas[n as usize]);
    }
    let seq = groups.sequencer() as usize;
    Ok(BenchReport {
        nodes: groups.nodes(),
        measured,
        window,
        coordinator: deltas[seq].times,
        intervals,
        replicas,
        checks,
        timeline,
        silences: Faults::default(),
        live: vec![true; groups.nodes() as usize],
        reincarnations: Vec::new(),
        fall_back: None,
        acknowledged: settled.iter().map(StarStats::committed).sum(),
    })
}
