//! The STAR experiments end to end with `--quick`: each starts real `phasedb node` processes on
//! 127.0.0.1 running STAR (and its baselines) and writes a CSV with the expected rows, an SVG and a
//! report whose claims carry the paper's numbers and a verdict computed from the rows.

mod common;

use std::process::Command;

use common::quick::{Output, run_quick};

/// Every point counted, committed transactions and had agreeing replicas; the report states the
/// setup, each claim's paper numbers and a verdict, echoed on stdout, and the replicas' claim holds.
fn check_common(o: &Output, claims: &[&str]) {
    assert!(
        o.column("status").iter().all(|s| *s == "ok"),
        "{:?}",
        o.rows
    );
    assert!(o.column("check").iter().all(|s| *s == "ok"), "{:?}", o.rows);
    assert!(o.numbers("throughput").iter().all(|&t| t > 0.0));
    assert!(o.column("nodes").iter().all(|n| *n == "2"));
    assert!(o.column("copies_compared").iter().all(|n| *n == "4"));
    for line in [
        "2 `phasedb node` processes",
        "1 full replica (node 0, also the coordinator) and 1 partial replica",
        "the nodes generate their own load (no networked clients), as in the paper's evaluation",
    ] {
        assert!(
            o.report.contains(line),
            "setup lacks `{line}`:\n{}",
            o.report
        );
    }
    for c in claims {
        assert!(
            o.report.contains(&format!("— {c}")),
            "claim `{c}` missing:\n{}",
            o.report
        );
        assert!(o.stdout.contains(c), "verdict of `{c}` not echoed");
    }
    assert_eq!(o.report.matches("\nVerdict: ").count(), claims.len());
    assert_eq!(o.report.matches("\nPaper: ").count(), claims.len());
    assert!(
        o.report
            .contains("Verdict: holds on this machine — every replica agrees"),
        "{}",
        o.report
    );
}

#[test]
fn star_iteration_sweeps_the_iteration_time_against_the_longest() {
    let o = run_quick("star-iteration");
    check_common(
        &o,
        &[
            "STAR at a 10 ms iteration reaches at least 0.9x its throughput at 100 ms",
            "at a 1.5 ms iteration phase switching costs about half the throughput",
            "throughput levels off from 20 ms",
            "every replica agrees",
        ],
    );
    assert_eq!(o.column("iteration_ms"), ["1.5", "10", "100"]);
    assert!(o.column("workload").iter().all(|w| *w == "ycsb"));
    assert!(o.column("cross_pct").iter().all(|c| *c == "10"));
    let overhead = o.numbers("overhead_pct");
    assert_eq!(overhead[2], 0.0, "the longest iteration is the reference");
    let phases = o.numbers("phases_per_s");
    assert!(
        phases[0] > phases[2],
        "a shorter iteration switches phases more often: {phases:?}"
    );
    assert!(
        o.report
            .contains("Verdict: not checked (fewer than 2 iterations of 20 ms or more measured)")
    );
}

#[test]
fn star_replication_compares_value_and_hybrid_bytes_and_throughput() {
    let o = run_quick("star-replication");
    check_common(
        &o,
        &[
            "with no cross-partition transactions hybrid replication writes at most 1/4 of value replication's bytes per transaction",
            "with no cross-partition transactions hybrid replication reaches at least 2x value replication's throughput",
            "the gap shrinks as more transactions are cross-partition",
            "value replication's bytes per transaction stay flat across the cross-partition share",
            "every replica agrees",
        ],
    );
    assert_eq!(
        o.column("replication"),
        ["value", "hybrid", "value", "hybrid"]
    );
    assert_eq!(o.column("cross_pct"), ["0", "0", "100", "100"]);
    assert!(o.column("workload").iter().all(|w| *w == "payment"));
    assert_eq!(
        o.numbers("cross_share"),
        [0.0, 0.0, 1.0, 1.0],
        "the nodes generate the exact share"
    );
    let bytes = o.numbers("bytes_per_txn");
    assert!(bytes.iter().all(|&b| b > 0.0), "{bytes:?}");
    assert!(
        bytes[1] < bytes[0],
        "operation replication carries only the written columns: {bytes:?}"
    );
}

#[test]
fn star_latency_reports_percentiles_at_each_cross_partition_share() {
    let o = run_quick("star-latency");
    check_common(
        &o,
        &[
            "STAR's latency is set by its 10 ms iteration",
            "STAR's p50 and p99 latencies are similar to those of PB-OCC",
            "with synchronous replication PB-OCC's median latency is a small fraction of STAR's",
            "with synchronous replication Dist-OCC's and Dist-S2PL's median latency grows",
            "every replica agrees",
        ],
    );
    assert_eq!(
        o.column("algorithm"),
        [
            "star",
            "star",
            "star",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "dist-occ",
            "dist-occ",
            "dist-occ",
            "dist-s2pl",
            "dist-s2pl",
            "dist-s2pl"
        ]
    );
    let replication = o.column("replication");
    assert_eq!(replication[6..9], ["sync", "sync", "sync"]);
    assert_eq!(replication.iter().filter(|r| **r == "async").count(), 12);
    assert_eq!(o.column("cross_pct")[..3], ["10", "50", "90"]);
    let (p50, p99) = (o.numbers("p50_ms"), o.numbers("p99_ms"));
    // Synchronous PB-OCC answers read-only transactions at once: its median may round to 0.
    assert!(
        p50.iter()
            .zip(&p99)
            .all(|(a, b)| *a >= 0.0 && a <= b && *b > 0.0),
        "{p50:?} {p99:?}"
    );
    assert!(p50[..6].iter().all(|&a| a > 0.0), "{p50:?}");
    assert!(
        o.report
            .contains("STAR's latency over each: p50 vs pb-occ at 10%"),
        "the asynchronous PB-OCC is compared:\n{}",
        o.report
    );
    assert!(
        o.report
            .contains("not checked (Dist-OCC and Dist-S2PL not measured)"),
        "the distributed baselines' claim waits for them:\n{}",
        o.report
    );
}

#[test]
fn star_network_injects_each_delay_and_compares_with_the_smallest() {
    let o = run_quick("star-network");
    check_common(
        &o,
        &[
            "STAR keeps its throughput up to 0.5 ms of delay, like PB-OCC",
            "at 10 ms of delay STAR keeps about a third of its throughput, like PB-OCC",
            "Dist-OCC keeps about a fifth of its throughput at 1 ms of delay",
            "every replica agrees",
        ],
    );
    assert_eq!(o.column("delay_ms"), ["0.1", "0.5", "2"].repeat(4));
    assert_eq!(
        o.column("algorithm"),
        ["star", "pb-occ", "dist-occ", "dist-s2pl"]
            .iter()
            .flat_map(|a| [*a; 3])
            .collect::<Vec<_>>()
    );
    assert!(o.column("replication").iter().all(|r| *r == "async"));
    let of_base = o.column("of_base_pct");
    assert_eq!((of_base[0], of_base[3]), ("100.0", "100.0"));
}

#[test]
fn star_compare_sets_star_beside_each_baseline_and_replication() {
    let o = run_quick("star-compare");
    check_common(
        &o,
        &[
            "with asynchronous replication STAR outperforms Dist-OCC and Dist-S2PL from 10% cross-partition transactions",
            "with asynchronous replication on YCSB at 10% cross-partition transactions STAR reaches at least 1.5x",
            "with every transaction cross-partition STAR approaches PB-OCC with asynchronous replication",
            "PB-OCC's throughput stays almost the same whatever the share of cross-partition transactions",
            "with synchronous replication STAR reaches at least 4x the throughput of each baseline",
            "every replica agrees",
        ],
    );
    assert_eq!(
        o.column("algorithm"),
        [
            "star",
            "star",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "pb-occ",
            "dist-occ",
            "dist-occ",
            "dist-s2pl",
            "dist-s2pl"
        ]
    );
    assert_eq!(
        o.column("replication"),
        [
            "async", "async", "async", "async", "sync", "sync", "async", "async", "async", "async"
        ]
    );
    assert_eq!(o.column("cross_pct"), ["10", "100"].repeat(5));
    assert!(o.column("workload").iter().all(|w| *w == "ycsb"));
    // PB-OCC's backup holds everything; STAR's node 1 is a partial replica.
    assert_eq!(
        o.column("full_replicas"),
        ["1", "1", "2", "2", "2", "2", "1", "1", "1", "1"]
    );
    let of_star = o.numbers("of_star_pct");
    assert_eq!((of_star[0], of_star[1]), (100.0, 100.0));
    assert!(
        !o.report.contains("Dist-OCC and Dist-S2PL not measured"),
        "the asynchronous distributed baselines are measured:\n{}",
        o.report
    );
    for line in [
        "lines: star, pb-occ async, pb-occ sync, dist-occ async, dist-s2pl async",
        "PB-OCC runs every transaction on node 0 (the primary)",
        "STAR runs value replication in both phases here",
    ] {
        assert!(
            o.report.contains(line),
            "setup lacks `{line}`:\n{}",
            o.report
        );
    }
}

#[test]
fn star_experiments_are_listed_as_built_and_refuse_flags_they_cannot_use() {
    let phasedb = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
            .args(args)
            .output()
            .expect("run phasedb");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, list, _) = phasedb(&["experiment", "--list"]);
    assert_eq!(code, Some(0));
    for name in [
        "star-compare",
        "star-iteration",
        "star-replication",
        "star-latency",
        "star-network",
        "star-failover",
    ] {
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed:\n{list}"));
        assert!(line.contains(" yes ") && line.contains("STAR"), "{line}");
    }
    for (flag, expect) in [
        (&["--protocols", "occ"][..], "--protocols does not apply"),
        (&["--in-process"][..], "runs each point on a cluster"),
    ] {
        let mut args = vec!["experiment", "star-iteration", "--quick"];
        args.extend(flag);
        let (code, _, err) = phasedb(&args);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(err.contains(expect), "{err}");
    }
}

#[test]
fn star_failover_plots_throughput_through_each_crash_and_a_restart() {
    let o = run_quick("star-failover");
    let scenarios = o.column("scenario");
    for name in ["partial-replica crash", "coordinator crash"] {
        let n = scenarios.iter().filter(|s| **s == name).count();
        // 0.5 s before and 1.5 s after the crash, in 100 ms intervals.
        assert!(
            (15..=22).contains(&n),
            "{name}: {n} intervals\n{}",
            o.stderr
        );
    }
    let status = o.column("status");
    let check = o.column("check");
    for (i, s) in scenarios.iter().enumerate() {
        if *s == "partial-replica crash" {
            assert_eq!(status[i], "ok", "{:?}\n{}", o.rows[i], o.stderr);
            assert_eq!(check[i], "ok", "{:?}", o.rows[i]);
        }
    }
    let t: Vec<f64> = o
        .numbers("t_s")
        .into_iter()
        .zip(&scenarios)
        .filter(|(_, s)| **s == "partial-replica crash")
        .map(|(t, _)| t)
        .collect();
    assert!(t.first().is_some_and(|&x| x <= 0.0) && t.last().is_some_and(|&x| x > 1.0));
    assert!(
        o.report
            .contains("Verdict: holds on this machine — every replica agrees")
    );
    let partial = o
        .report
        .lines()
        .find(|l| l.contains("— after the crash of a partial replica"))
        .unwrap_or_else(|| panic!("no partial-replica claim:\n{}", o.report));
    assert!(
        partial.starts_with("Verdict: holds") || partial.starts_with("Verdict: does not hold"),
        "the verdict comes from the rows: {partial}"
    );
    assert!(
        o.report
            .contains("txn/s before the crash, lowest 100 ms interval after it")
    );
    assert!(o.stdout.contains("after the crash of the coordinator"));
    // The restarted node's rows: it rejoined (its copy finished) and every replica, its own
    // included, agrees.
    let rejoin = o.column("rejoin_s");
    let restart: Vec<usize> = (0..scenarios.len())
        .filter(|&i| scenarios[i] == "partial-replica restart")
        .collect();
    assert!(
        restart.len() >= 15,
        "{} restart intervals\n{}",
        restart.len(),
        o.stderr
    );
    for &i in &restart {
        assert_eq!(check[i], "ok", "{:?}\n{}", o.rows[i], o.stderr);
        let t: f64 = rejoin[i]
            .parse()
            .unwrap_or_else(|_| panic!("{:?}", o.rows[i]));
        assert!((0.0..10.0).contains(&t), "rejoined {t} s after the restart");
    }
    let claim = o
        .report
        .lines()
        .find(|l| l.contains("— a restarted partial replica is back in the cycle"))
        .unwrap_or_else(|| panic!("no restart claim:\n{}", o.report));
    assert!(claim.starts_with("Verdict: holds"), "{claim}");
}
