//! The Doppel paper's experiments as a user runs them with `--quick`: each writes its CSV, SVG and
//! report, with one verdict per claim.

mod common;

use std::process::Command;

use common::TempDir;

/// Runs `name --quick` on two threads; checks the files and returns (CSV header, CSV rows, report).
fn quick(name: &str, claims: usize) -> (Vec<String>, Vec<Vec<String>>, String) {
    let dir = TempDir::new(&format!("doppel-{name}"));
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(["experiment", name, "--quick", "--threads-max", "2", "--out"])
        .arg(&dir.0)
        .output()
        .expect("run phasedb");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("Verdict: "))
            .count(),
        claims,
        "{stdout}"
    );
    let csv = std::fs::read_to_string(dir.0.join(format!("{name}.csv"))).expect("CSV written");
    let (header, rows) = common::quick::parse_csv(&csv);
    assert!(!rows.is_empty(), "{name}: no rows");
    for col in ["protocol", "throughput", "status"] {
        assert!(
            header.iter().any(|h| h == col),
            "{name}: no {col} in {header:?}"
        );
    }
    let tput = header.iter().position(|h| h == "throughput").unwrap();
    assert!(
        rows.iter()
            .any(|r| r[tput].parse::<f64>().unwrap_or(0.0) > 0.0),
        "{name}: nothing committed"
    );
    let svg = std::fs::read_to_string(dir.0.join(format!("{name}.svg"))).expect("SVG written");
    assert!(svg.starts_with("<svg") && svg.contains("committed transactions / s"));
    let md = std::fs::read_to_string(dir.0.join(format!("{name}.md"))).expect("report written");
    assert_eq!(md.matches("### Claim ").count(), claims, "{md}");
    assert!(md.contains("## What the paper found"), "{md}");
    (header, rows, md)
}

fn protocols(header: &[String], rows: &[Vec<String>]) -> Vec<String> {
    let p = header.iter().position(|h| h == "protocol").unwrap();
    let mut v: Vec<String> = rows.iter().map(|r| r[p].clone()).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn incr1_compares_doppel_with_occ_2pl_and_atomic() {
    let (header, rows, md) = quick("incr1", 5);
    assert_eq!(
        protocols(&header, &rows),
        ["2pl", "atomic", "doppel", "occ"]
    );
    assert_eq!(rows.len(), 8, "2 hot shares x 4 protocols");
    assert!(md.contains("at 100% hot Doppel is at least 1.8x occ"));
    assert!(header.iter().any(|h| h == "split_records"), "{header:?}");
}

#[test]
fn incr1_scaling_and_incrz_run() {
    let (_, rows, _) = quick("incr1-scaling", 1);
    assert_eq!(rows.len(), 8, "2 thread counts x 4 protocols");
    let (header, rows, md) = quick("incrz", 2);
    assert_eq!(protocols(&header, &rows), ["doppel", "occ"]);
    assert!(md.contains("splits 1 to 4 keys"));
}

#[test]
fn like_experiments_report_latency_per_transaction_type() {
    let (header, _, md) = quick("like", 2);
    assert!(header.iter().any(|h| h == "read_p99_us"), "{header:?}");
    assert!(md.contains("read p99 µs"));
    let (header, rows, _) = quick("like-latency", 2);
    assert!(header.iter().any(|h| h == "write_p50_us"), "{header:?}");
    assert_eq!(rows.len(), 4, "2 skews x 2 protocols");
    let (header, rows, _) = quick("phase-length", 2);
    assert_eq!(
        protocols(&header, &rows),
        ["skewed", "skewed write-heavy", "uniform"]
    );
}

#[test]
fn incr1_moving_records_throughput_over_time() {
    let (header, rows, md) = quick("incr1-moving", 2);
    let seconds = header.iter().position(|h| h == "seconds").expect("seconds");
    assert!(rows.len() > 20, "a time series: {} windows", rows.len());
    let t: Vec<f64> = rows.iter().map(|r| r[seconds].parse().unwrap()).collect();
    assert!(t.windows(2).any(|w| w[1] > w[0]));
    assert!(md.contains("recovery after each change"));
}

#[test]
fn rubis_runs_both_mixes() {
    let (header, rows, md) = quick("rubis", 2);
    let mix = header.iter().position(|h| h == "mix").expect("mix column");
    let mixes: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[mix].as_str()).collect();
    assert_eq!(mixes.into_iter().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(protocols(&header, &rows), ["2pl", "doppel", "occ"]);
    assert!(md.contains("RUBiS-B"));
}
