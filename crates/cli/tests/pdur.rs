//! P-DUR from the command line: `phasedb bench pdur-micro|twitter` on replicas it starts as
//! `phasedb node` processes (P-DUR, DUR) or on the embedded store, its refusals, and the three
//! P-DUR experiments end to end with `--quick`.

mod common;

use std::process::Command;

use common::quick::run_quick;

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

/// `phasedb bench <args> --json`, short: the JSON object, after checking the run succeeded.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let out = phasedb()
        .arg("bench")
        .args(args)
        .args(["--duration", "0.5", "--warmup", "0.1", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn committed_of(v: &serde_json::Value, ty: &str) -> u64 {
    v["types"]
        .as_array()
        .expect("types")
        .iter()
        .find(|t| t["type"] == ty)
        .unwrap_or_else(|| panic!("no type {ty}: {v}"))["committed"]
        .as_u64()
        .unwrap()
}

#[test]
fn pdur_and_dur_replicas_commit_and_agree() {
    let v = bench_json(&[
        "pdur-micro",
        "--items",
        "4000",
        "--cluster",
        "2",
        "--algorithm",
        "pdur",
        "--partitions",
        "2",
        "--cross-partition",
        "0.2",
    ]);
    assert_eq!(v["algorithm"], "pdur");
    assert_eq!(v["partitions"], 2);
    assert_eq!(v["digests_equal"], true, "{v}");
    assert!(committed_of(&v, "I") > 50, "{v}");
    assert!(v["throughput"].as_f64().unwrap() > 0.0);
    let v = bench_json(&[
        "pdur-micro",
        "--type",
        "III",
        "--items",
        "4000",
        "--cluster",
        "2",
        "--algorithm",
        "dur",
    ]);
    assert_eq!(v["partitions"], 1);
    assert_eq!(v["digests_equal"], true, "{v}");
    assert!(committed_of(&v, "III") > 20, "{v}");
}

#[test]
fn twitter_reports_each_operation_and_the_embedded_store_runs_the_micro_benchmark() {
    let v = bench_json(&[
        "twitter",
        "--users",
        "400",
        "--cluster",
        "1",
        "--algorithm",
        "pdur",
    ]);
    assert_eq!(v["digests_equal"], true, "{v}");
    for op in ["timeline", "post", "follow"] {
        assert!(committed_of(&v, op) > 0, "{op}: {v}");
    }
    let v = bench_json(&[
        "pdur-micro",
        "--type",
        "II",
        "--items",
        "4000",
        "--algorithm",
        "embedded-store",
        "--threads",
        "2",
    ]);
    assert_eq!(v["algorithm"], "embedded-store");
    assert!(v["digests_equal"].is_null());
    assert!(committed_of(&v, "II") > 100, "{v}");
}

#[test]
fn bad_p_dur_flags_are_refused_with_a_reason() {
    for (args, why) in [
        (vec!["pdur-micro", "--algorithm", "pdur"], "--cluster N"),
        (
            vec!["pdur-micro", "--cluster", "1", "--algorithm", "ramp-f"],
            "--algorithm pdur, dur or embedded-store",
        ),
        (
            vec![
                "pdur-micro",
                "--cluster",
                "2",
                "--algorithm",
                "dur",
                "--partitions",
                "2",
            ],
            "one partition",
        ),
        (
            vec![
                "pdur-micro",
                "--cluster",
                "1",
                "--algorithm",
                "pdur",
                "--cross-partition",
                "2",
            ],
            "between 0 and 1",
        ),
        (
            vec!["twitter", "--algorithm", "embedded-store"],
            "pdur-micro only",
        ),
        (
            vec!["ycsb", "--cluster", "1", "--algorithm", "pdur"],
            "pdur-micro and twitter",
        ),
        (
            vec![
                "pdur-micro",
                "--cluster",
                "1",
                "--algorithm",
                "pdur",
                "--partitions",
                "200",
            ],
            "partitions must be 1..=128",
        ),
        (
            vec![
                "pdur-micro",
                "--cluster",
                "3",
                "--algorithm",
                "pdur",
                "--local-clients",
                "--kill-node",
                "1",
                "--at",
                "1",
            ],
            "drop --local-clients",
        ),
        (
            vec![
                "pdur-micro",
                "--algorithm",
                "embedded-store",
                "--kill-node",
                "0",
                "--at",
                "1",
            ],
            "--kill-node needs --cluster N",
        ),
    ] {
        let out = phasedb().arg("bench").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
}

fn check_claims(o: &common::quick::Output, claims: &[&str]) {
    assert!(
        o.column("status").iter().all(|s| *s == "ok"),
        "{:?}\n{}",
        o.rows,
        o.stderr
    );
    assert!(o.numbers("throughput").iter().all(|&t| t > 0.0));
    for c in claims {
        assert!(
            o.report.contains(&format!("— {c}")),
            "claim `{c}` missing:\n{}",
            o.report
        );
        assert!(o.stdout.contains(c), "verdict of `{c}` not echoed");
    }
    assert_eq!(o.report.matches("\nVerdict: ").count(), claims.len());
    assert!(
        o.report
            .contains("Verdict: holds on this machine — every replica agrees"),
        "{}",
        o.report
    );
    assert!(o.report.contains("scaled to a 2-core machine"));
}

#[test]
fn pdur_baseline_compares_partitions_replicas_and_the_embedded_store() {
    let o = run_quick("pdur-baseline");
    check_claims(
        &o,
        &[
            "P-DUR scales up",
            "P-DUR with 2 partitions commits at least 1.5x",
            "DUR flattens",
            "the standalone embedded store peaks at a few threads",
            "every replica agrees",
        ],
    );
    assert_eq!(
        o.column("algorithm"),
        [
            "pdur",
            "pdur",
            "dur",
            "dur",
            "embedded-store",
            "embedded-store"
        ]
    );
    assert!(o.report.contains("γe = "), "{}", o.report);
    assert!(o.report.contains("model (equation 5)"));
    assert!(o.report.contains("phasedb's own embedded engine (OCC)"));
}

#[test]
fn pdur_cross_and_twitter_run_their_sweeps() {
    let o = run_quick("pdur-cross");
    check_claims(
        &o,
        &[
            "P-DUR's throughput falls with the cross-partition share",
            "DUR commits at least as much as P-DUR",
            "every replica agrees",
        ],
    );
    assert_eq!(o.column("cross_pct"), ["0.1", "100", "0", "0"]);
    let o = run_quick("pdur-twitter");
    check_claims(
        &o,
        &[
            "P-DUR scales with partitions on the Twitter-like mix",
            "read-only timelines, committed without broadcast",
            "every replica agrees",
        ],
    );
    assert_eq!(o.column("partitions"), ["1", "2"]);
    assert!(o.numbers("p90_ms_timeline").iter().all(|&l| l > 0.0));
}
