//! Calvin beside STAR end to end: `phasedb bench --algorithm calvin` refuses bad splits, and the
//! `star-calvin` experiment with `--quick` starts real `phasedb node` processes for STAR and for
//! Calvin's three replica-group splits and writes rows, a plot and a report whose claims carry the
//! paper's numbers and verdicts computed from the rows.

mod common;

use std::process::Command;

use common::quick::run_quick;

fn phasedb(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(args)
        .output()
        .expect("run phasedb");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn calvin_flags_that_cannot_run_are_refused_before_any_node_starts() {
    let bench = ["bench", "tpcc", "--cluster", "4", "--duration", "0.2"];
    let with = |extra: &[&str]| {
        let mut a = bench.to_vec();
        a.extend_from_slice(extra);
        phasedb(&a)
    };
    let (code, err) = with(&["--algorithm", "calvin", "--calvin-groups", "1:x"]);
    assert_eq!(code, 2);
    assert!(err.contains("such as 1:3, 2:2 or 4"), "{err}");
    let (code, err) = with(&["--algorithm", "calvin", "--calvin-groups", "2:3"]);
    assert_eq!(code, 2);
    assert!(err.contains("needs 5 nodes, not --cluster 4"), "{err}");
    let (code, err) = with(&["--algorithm", "star", "--calvin-groups", "2:2"]);
    assert_eq!(code, 2);
    assert!(err.contains("--algorithm calvin only"), "{err}");
}

#[test]
fn star_calvin_compares_star_with_each_replica_group_split() {
    let o = run_quick("star-calvin");
    assert!(
        o.column("status").iter().all(|s| *s == "ok"),
        "{:?}",
        o.rows
    );
    assert!(o.column("check").iter().all(|s| *s == "ok"), "{:?}", o.rows);
    assert!(o.numbers("throughput").iter().all(|&t| t > 0.0));
    assert_eq!(
        o.column("system"),
        [
            "star",
            "calvin-1:3",
            "calvin-2:2",
            "calvin-4",
            "star",
            "calvin-1:3",
            "calvin-2:2",
            "calvin-4"
        ]
    );
    assert!(o.column("nodes").iter().all(|n| *n == "4"));
    let cross = o.numbers("cross_share");
    assert!(cross[..4].iter().all(|&c| c == 0.0), "{cross:?}");
    assert!(cross[4..].iter().all(|&c| c > 0.9), "{cross:?}");
    for c in [
        "at 0% cross-partition STAR is at least 3x Calvin's best configuration",
        "at 100% cross-partition STAR is at least 2x Calvin's best configuration",
        "every replica agrees",
    ] {
        assert!(o.report.contains(c), "claim `{c}` missing:\n{}", o.report);
        assert!(o.stdout.contains(c), "verdict of `{c}` not echoed");
    }
    assert!(o.report.contains("STAR is 9x faster than Calvin-4"));
    assert!(o.report.contains("Calvin-1:3, -2:2, -4"));
    assert!(
        o.report
            .contains("Verdict: holds on this machine — every replica agrees"),
        "{}",
        o.report
    );
}
