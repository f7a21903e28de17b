//! The four RAMP experiments end to end with `--quick`: each starts real `phasedb node` processes on
//! 127.0.0.1 and writes a CSV with the expected rows and columns, an SVG and a report whose claims
//! carry the paper's numbers and a verdict.

mod common;

use common::quick::{Output, run_quick};

/// Every point counted and committed transactions; the report states each claim's paper numbers
/// and a verdict, echoed on stdout.
fn check_common(o: &Output, claims: &[&str]) {
    for col in [
        "algorithm",
        "servers",
        "clients",
        "read_ratio",
        "throughput",
        "p50_us",
        "p99_us",
        "status",
    ] {
        assert!(o.header.iter().any(|h| h == col), "no column {col}");
    }
    assert!(
        o.column("status").iter().all(|s| *s == "ok"),
        "{:?}",
        o.rows
    );
    assert!(
        o.column("throughput")
            .iter()
            .all(|t| t.parse::<f64>().unwrap() > 0.0)
    );
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
}

#[test]
fn ramp_clients_compares_every_algorithm_at_each_client_count() {
    let o = run_quick("ramp-clients");
    check_common(
        &o,
        &[
            "RAMP-F and RAMP-H reach at least 0.9x NWNR's peak throughput",
            "RAMP-S, paying a second read round always, reaches at least 0.5x NWNR's peak",
            "every RAMP algorithm reaches at least 2x LWLR's peak throughput",
            "RAMP-F and RAMP-H outperform every lock-based baseline and E-PCI",
            "no lock-based baseline deadlocks: every point commits transactions",
        ],
    );
    assert_eq!(o.rows.len(), 2 * 8);
    let algs = o.column("algorithm");
    for a in [
        "ramp-f", "ramp-s", "ramp-h", "nwnr", "lwnr", "lwsr", "lwlr", "e-pci",
    ] {
        assert_eq!(algs.iter().filter(|x| **x == a).count(), 2, "{a}");
    }
    assert!(o.report.contains("no lock-baseline point") || o.report.contains("none stalled"));
}

#[test]
fn ramp_sweeps_varies_each_parameter_against_nwnr() {
    let o = run_quick("ramp-sweeps");
    check_common(
        &o,
        &[
            "RAMP overhead is never above 50%",
            "RAMP-F and RAMP-H are typically within 8% of NWNR",
            "with all writes every RAMP algorithm takes two round trips",
            "with all reads RAMP-F and E-PCI match NWNR",
        ],
    );
    assert_eq!(o.rows.len(), 4 * 2 * 2);
    let sweeps = o.column("sweep");
    for s in ["read_pct", "txn_size", "value_bytes", "items"] {
        assert_eq!(sweeps.iter().filter(|x| **x == s).count(), 4, "{s}");
    }
    let ops = o.column("ops");
    assert!(ops.contains(&"2") && ops.contains(&"8"));
}

#[test]
fn ramp_ctp_finishes_every_write_whose_commit_was_dropped() {
    let o = run_quick("ramp-ctp");
    check_common(
        &o,
        &[
            "every write whose COMMIT was dropped completes: none is left prepared and CTP aborts none",
        ],
    );
    assert_eq!(o.column("dropped_pct"), ["0", "1"]);
    assert_eq!(o.column("pending_after"), ["0", "0"]);
    assert_eq!(o.column("ctp_aborts"), ["0", "0"]);
    assert_eq!(o.column("nodes_reporting"), ["2", "2"], "{}", o.stderr);
    let ctp: Vec<u64> = o
        .column("ctp_commits")
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(ctp[0], 0, "nothing for CTP when no COMMIT is dropped");
    assert!(
        ctp[1] > 0,
        "CTP committed the writes whose COMMIT was dropped"
    );
    assert!(
        o.report
            .contains("Verdict: holds on this machine — every write whose COMMIT was dropped")
    );
}

#[test]
fn ramp_scale_adds_servers_with_uniform_access() {
    let o = run_quick("ramp-scale");
    check_common(
        &o,
        &[
            "RAMP-F scales linearly",
            "at every scale RAMP-F stays within 10% of NWNR",
        ],
    );
    assert_eq!(o.rows.len(), 2 * 4);
    assert_eq!(o.column("servers").iter().filter(|s| **s == "2").count(), 4);
    assert!(o.column("theta").iter().all(|t| *t == "0"));
}
