//! `phasedb experiment` as a user runs it: the list, clear errors, and the files a quick run writes.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::TempDir;

/// The experiments of `shared/EXPERIMENTS.md`.
const NAMES: [&str; 23] = [
    "incr1",
    "incr1-scaling",
    "incr1-moving",
    "incrz",
    "like",
    "like-latency",
    "phase-length",
    "rubis",
    "granularity-ycsb",
    "granularity-tpcc",
    "pdur-baseline",
    "pdur-cross",
    "pdur-twitter",
    "ramp-clients",
    "ramp-sweeps",
    "ramp-ctp",
    "ramp-scale",
    "star-compare",
    "star-latency",
    "star-calvin",
    "star-iteration",
    "star-replication",
    "star-network",
];

fn phasedb(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(args)
        .output()
        .expect("run phasedb");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `granularity-ycsb --quick` on OCC with one thread: the smallest sweep, three points (coarse,
/// fine and auto).
const QUICK_OCC: [&str; 7] = [
    "experiment",
    "granularity-ycsb",
    "--quick",
    "--threads-max",
    "1",
    "--protocols",
    "occ",
];

/// Runs [`QUICK_OCC`] writing into `out_dir`, plus `extra` flags.
fn quick_occ_sweep(out_dir: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = QUICK_OCC.to_vec();
    args.extend(["--out", out_dir]);
    args.extend(extra);
    phasedb(&args)
}

/// Names in the first column of the tables of `EXPERIMENTS.md`, if the shared folder is there.
fn names_in_shared_doc() -> Option<Vec<String>> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/EXPERIMENTS.md");
    let text = std::fs::read_to_string(doc).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" |").next())
            .filter(|n| {
                *n != "name"
                    && !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn list_names_every_experiment() {
    let (code, out, err) = phasedb(&["experiment", "--list"]);
    assert_eq!(code, 0, "stderr: {err}");
    let listed: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for name in NAMES {
        assert!(listed.contains(&name), "--list lacks {name}:\n{out}");
    }
    if let Some(doc) = names_in_shared_doc() {
        assert_eq!(doc.len(), NAMES.len(), "EXPERIMENTS.md changed: {doc:?}");
        for name in &doc {
            assert!(listed.contains(&name.as_str()), "--list lacks {name}");
        }
    }
    let ycsb = out
        .lines()
        .find(|l| l.starts_with("granularity-ycsb "))
        .expect("granularity-ycsb line");
    assert!(
        ycsb.contains("yes") && ycsb.contains("OCC timestamp granularity"),
        "{ycsb}"
    );
}

#[test]
fn unknown_names_fail_with_a_hint() {
    let (code, _, err) = phasedb(&["experiment", "no-such-thing"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown experiment `no-such-thing`"), "{err}");
    assert!(err.contains("available in this build: incr1,"), "{err}");
    assert!(err.contains("granularity-ycsb"), "{err}");
    let (code, _, err) = phasedb(&["experiment"]);
    assert_eq!(code, 2);
    assert!(err.contains("--list"), "{err}");
    let (code, _, err) = phasedb(&["experiment", "granularity-ycsb", "--threads-max", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--threads-max"), "{err}");
    let (code, _, err) = phasedb(&["experiment", "ramp-ctp", "--in-process"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("ramp-ctp runs each point on a cluster of phasedb node processes"),
        "{err}"
    );
}

/// Runs `name --quick` up to `threads` threads (on `protocols`, or every protocol if empty) and
/// checks the CSV, the SVG and the report; returns the report.
fn quick_run_writes_its_files(
    name: &str,
    threads: usize,
    protocols: &[&str],
    claims: usize,
) -> String {
    let dir = TempDir::new(name);
    let out_dir = dir.0.to_str().expect("utf-8 temp path");
    let threads_max = threads.to_string();
    let chosen = protocols.join(",");
    let mut args = vec![
        "experiment",
        name,
        "--quick",
        "--threads-max",
        &threads_max,
        "--out",
        out_dir,
    ];
    if !protocols.is_empty() {
        args.extend(["--protocols", &chosen]);
    }
    let (code, out, err) = phasedb(&args);
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("Verdict: ")).count(),
        claims,
        "{out}"
    );

    let csv = std::fs::read_to_string(dir.0.join(format!("{name}.csv"))).expect("CSV written");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header[..3], ["protocol", "granularity", "threads"]);
    for col in [
        "seed",
        "throughput",
        "abort_rate",
        "p50_us",
        "p99_us",
        "p999_us",
        "committed",
        "status",
    ] {
        assert!(header.contains(&col), "CSV header lacks {col}: {header:?}");
    }
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let ran: BTreeSet<&str> = rows.iter().map(|r| r[0]).collect();
    let expected: &[&str] = if protocols.is_empty() {
        &["occ", "nocc"]
    } else {
        protocols
    };
    for p in expected {
        assert!(ran.contains(p), "{p} missing from {ran:?}");
    }
    let points: BTreeSet<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    assert_eq!(points.len(), rows.len(), "one row per point");
    let fixed = rows.iter().filter(|r| r[1] != "auto").count();
    let auto = rows.len() - fixed;
    assert_eq!(
        fixed,
        ran.len() * 2 * threads,
        "protocols x fixed granularities x threads"
    );
    assert!(
        auto > 0 && auto.is_multiple_of(threads) && auto <= ran.len() * threads,
        "an auto series at every thread count for the protocols that regroup: {auto} rows"
    );
    let tput = header
        .iter()
        .position(|c| *c == "throughput")
        .expect("throughput column");
    let occ = rows.iter().find(|r| r[0] == "occ").expect("an OCC row");
    assert!(occ[tput].parse::<f64>().expect("a number") > 0.0);

    let svg = std::fs::read_to_string(dir.0.join(format!("{name}.svg"))).expect("SVG written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in [
        "worker threads",
        "committed transactions / s",
        "aborted attempts (%)",
        "occ",
    ] {
        assert!(svg.contains(label), "SVG lacks {label}");
    }

    let md = std::fs::read_to_string(dir.0.join(format!("{name}.md"))).expect("report written");
    let verdicts: Vec<&str> = md.lines().filter(|l| l.starts_with("Verdict: ")).collect();
    assert_eq!(verdicts.len(), claims, "{md}");
    assert_eq!(md.matches("### Claim ").count(), claims);
    for v in verdicts {
        let known = [
            "Verdict: holds on this machine — ",
            "Verdict: does not hold on this machine — ",
            "Verdict: not checked (",
        ];
        assert!(known.iter().any(|k| v.starts_with(k)), "{v}");
    }
    md
}

#[test]
fn granularity_ycsb_quick_writes_csv_svg_and_report() {
    let md = quick_run_writes_its_files("granularity-ycsb", 2, &[], 5);
    assert!(md.contains("fine/coarse txn/s"));
    assert!(md.contains("OCC and SwissTM"));
    assert!(md.contains("fine/coarse at theta 0, pairs "), "{md}");
    assert!(md.contains("auto/coarse at theta 0, pairs "), "{md}");
}

#[test]
fn granularity_tpcc_quick_writes_csv_svg_and_report() {
    // TPC-C loads a whole warehouse and checks its consistency after every point, so this run
    // keeps to OCC.
    let md = quick_run_writes_its_files("granularity-tpcc", 2, &["occ"], 4);
    assert!(md.contains("30.91%"));
    assert!(md.contains("OCC is the fastest"));
}

/// `granularity-shift --quick`: every grouping's abort rate per interval, two verdicts (phase 1,
/// phase 2), and automatic groups' changes in the report.
#[test]
fn granularity_shift_quick_reports_abort_rates_over_time() {
    let dir = TempDir::new("granularity-shift");
    let out_dir = dir.0.to_str().expect("utf-8 temp path");
    let (code, out, err) = phasedb(&[
        "experiment",
        "granularity-shift",
        "--quick",
        "--out",
        out_dir,
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("Verdict: ")).count(),
        2,
        "{out}"
    );
    let csv = std::fs::read_to_string(dir.0.join("granularity-shift.csv")).expect("CSV written");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    assert_eq!(header[..3], ["protocol", "granularity", "seconds"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for g in ["coarse", "fine", "first", "second", "auto"] {
        let n = rows.iter().filter(|r| r[1] == g).count();
        // 1.2 s in 50 ms intervals.
        assert!((20..=26).contains(&n), "{g}: {n} intervals");
        assert!(rows.iter().any(|r| r[1] == g && r[0] == format!("occ {g}")));
    }
    let md = std::fs::read_to_string(dir.0.join("granularity-shift.md")).expect("report written");
    assert!(md.contains("auto's group changes: "), "{md}");
}

/// `--runs N` runs every point once per round: all first runs come before any second run, and
/// the report says how the runs were reduced.
#[test]
fn runs_go_in_rounds_over_every_point() {
    let dir = TempDir::new("rounds");
    let out_dir = dir.0.to_str().expect("utf-8 temp path");
    let (code, _, err) = quick_occ_sweep(out_dir, &["--runs", "2"]);
    assert_eq!(code, 0, "stderr: {err}");
    let runs: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split(" (run ").nth(1))
        .collect();
    assert!(runs.len() >= 6, "three points, two runs each: {err}");
    let first_second = runs.iter().position(|r| r.starts_with("2 of 2"));
    let last_first = runs.iter().rposition(|r| r.starts_with("1 of 2"));
    assert!(
        matches!((last_first, first_second), (Some(a), Some(b)) if a < b),
        "every point's first run before any second run: {err}"
    );
    assert_eq!(
        runs.iter().filter(|r| r.starts_with("1 of 2")).count(),
        runs.iter().filter(|r| r.starts_with("2 of 2")).count()
    );
    let md = std::fs::read_to_string(dir.0.join("granularity-ycsb.md")).expect("report written");
    assert!(
        md.contains("median throughput of 2 runs per point, run in rounds"),
        "{md}"
    );
}

/// A sweep runs each run of a point in a process of its own, unless told `--in-process`; both give
/// the same points, and the report says which way they ran.
#[test]
fn points_run_in_processes_of_their_own_unless_told_otherwise() {
    let mut points = Vec::new();
    for (flag, line) in [
        (None, "one run per point, each run in a fresh process"),
        (
            Some("--in-process"),
            "one run per point, all in one process (--in-process)",
        ),
    ] {
        let dir = TempDir::new("placement");
        let out_dir = dir.0.to_str().expect("utf-8 temp path");
        let (code, _, err) = quick_occ_sweep(out_dir, flag.as_slice());
        assert_eq!(code, 0, "stderr: {err}");
        let md = std::fs::read_to_string(dir.0.join("granularity-ycsb.md")).expect("report");
        assert!(md.contains(line), "{md}");
        let csv = std::fs::read_to_string(dir.0.join("granularity-ycsb.csv")).expect("CSV");
        let rows: Vec<(String, String, String, String)> = csv
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let status = f.last().expect("a status column").to_string();
                (f[0].into(), f[1].into(), f[2].into(), status)
            })
            .collect();
        assert_eq!(rows.len(), 3, "{csv}");
        assert!(rows.iter().all(|r| r.3 == "ok"), "{csv}");
        points.push(rows);
    }
    assert_eq!(points[0], points[1]);
}

/// `--point N` is how a sweep starts a point's process: it runs that point once, prints its outcome
/// on one line and writes no files; a point that does not exist is a clear error.
#[test]
fn a_point_process_prints_its_outcome_and_writes_nothing() {
    let dir = TempDir::new("point");
    let out = dir.0.join("out");
    let out_dir = out.to_str().expect("utf-8 temp path");
    let (code, stdout, err) = quick_occ_sweep(out_dir, &["--point", "1"]);
    assert_eq!(code, 0, "stderr: {err}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let outcome = lines[0]
        .strip_prefix("phasedb-point {")
        .expect("an outcome line");
    assert!(outcome.contains("\"check\":null"), "{stdout}");
    assert!(!outcome.contains("\"committed\":0,"), "{stdout}");
    assert!(!out.exists(), "a point process writes no files");

    let (code, stdout, err) = quick_occ_sweep(out_dir, &["--point", "3"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        err.contains("--point 3: granularity-ycsb has 3 points"),
        "{err}"
    );
}

/// A sweep's point processes run the build the experiment started with, even once its binary is
/// gone (rebuilt or removed while a long experiment runs).
#[test]
fn point_processes_run_the_build_that_started_even_when_its_file_is_gone() {
    let dir = TempDir::new("gone");
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let copy = dir.0.join("phasedb-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_phasedb"), &copy).expect("copy the binary");
    let out = dir.0.join("out");
    let child = Command::new(&copy)
        .args(QUICK_OCC)
        .args(["--runs", "2", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the copy");
    std::fs::remove_file(&copy).expect("remove the copy");
    let done = child.wait_with_output().expect("wait for the experiment");
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    let csv = std::fs::read_to_string(out.join("granularity-ycsb.csv")).expect("CSV");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(rows.iter().all(|r| r.ends_with(",ok")), "{csv}\n{err}");
}

/// `durability --quick` (SiloR, issue 34): every workload with and without logging, a recovery,
/// five verdicts computed from them; the recovery row counts the records it replayed.
#[test]
fn durability_quick_measures_logging_cost_and_recovery() {
    let dir = TempDir::new("durability");
    let out_dir = dir.0.to_str().expect("utf-8 temp path");
    let (code, out, err) = phasedb(&["experiment", "durability", "--quick", "--out", out_dir]);
    assert_eq!(code, 0, "stderr: {err}");
    let verdicts: Vec<&str> = out.lines().filter(|l| l.starts_with("Verdict: ")).collect();
    assert_eq!(verdicts.len(), 5, "{out}");
    assert!(
        verdicts[4].contains("not checked (--quick recovers 20000 rows"),
        "{out}"
    );
    let mut csv = csv::Reader::from_path(dir.0.join("durability.csv")).expect("CSV written");
    let header = csv.headers().expect("header").clone();
    let col = |name: &str| header.iter().position(|h| h == name).expect(name);
    let rows: Vec<csv::StringRecord> = csv.records().map(|r| r.expect("row")).collect();
    for setting in ["ycsb off", "ycsb group", "tpcc no-p off", "tpcc no-p group"] {
        let row = (rows.iter())
            .find(|r| &r[col("setting")] == setting)
            .unwrap_or_else(|| panic!("{setting} ran"));
        assert_eq!(&row[col("status")], "ok", "{setting}");
        assert!(row[col("committed")].parse::<u64>().expect("count") > 0);
        let logged = !row[col("log_bytes_per_txn")].is_empty();
        assert_eq!(logged, setting.ends_with("group"), "{setting}");
        if !logged {
            assert!(row[col("durable_p99_epochs")].is_empty(), "{setting}");
        }
    }
    let recovery = (rows.iter())
        .find(|r| &r[col("setting")] == "ycsb recovery")
        .expect("a recovery row");
    assert_eq!(&recovery[col("checkpoint_rows")], "20000");
    assert!(
        recovery[col("log_records")]
            .parse::<u64>()
            .expect("records")
            > 0
    );
    assert!(!dir.0.join("data").exists() && !dir.0.join("data-recovery").exists());
    let md = std::fs::read_to_string(dir.0.join("durability.md")).expect("report written");
    assert!(md.contains("records/s per core"), "{md}");
}
