//! The `phasedb` binary as a user runs it: JSON output, verification, histories for Elle, and clear
//! errors on bad flags.

use std::process::Command;

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

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"))
}

#[test]
fn bench_json_has_the_promised_fields() {
    let (code, out, err) = phasedb(&[
        "bench",
        "ycsb",
        "--protocol",
        "occ",
        "--threads",
        "2",
        "--duration",
        "0.3",
        "--warmup",
        "0.1",
        "--rows",
        "5000",
        "--granularity",
        "fine",
        "--json",
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    let v = json(&out);
    assert!(v["throughput"].as_f64().unwrap() > 0.0);
    let abort = v["abort_rate"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&abort));
    for q in ["p50", "p99", "p999"] {
        assert!(v["latency_us"][q].as_f64().unwrap() > 0.0, "latency {q}");
    }
    assert!(v["per_type"]["ycsb"]["committed"].as_u64().unwrap() > 0);
    // Two busy workers for 0.3 s use CPU time, at most the window's length each.
    let cpu = v["worker_cpu_s"].as_f64().unwrap();
    assert!(
        cpu > 0.0 && cpu <= 2.0 * v["measured_s"].as_f64().unwrap() + 0.05,
        "{cpu}"
    );
    let per_cpu = v["committed_per_cpu_s"].as_f64().unwrap();
    assert!((per_cpu * cpu - v["committed"].as_f64().unwrap()).abs() < 1.0);
    assert_eq!(v["config"]["protocol"], "occ");
    assert_eq!(v["config"]["threads"], 2);
    assert_eq!(v["config"]["rows"], 5000.0);
    assert_eq!(v["config"]["granularity"], "fine");
    assert_eq!(v["check"], "ok");
}

#[test]
fn verify_checks_the_recorded_history() {
    let (code, out, err) = phasedb(&[
        "bench",
        "bank",
        "--accounts",
        "10",
        "--threads",
        "2",
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "--verify",
        "--json",
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    let v = json(&out);
    assert_eq!(v["serializable"]["verdict"], "ok");
    assert!(v["serializable"]["transactions"].as_u64().unwrap() > 100);
    assert_eq!(v["check"], "ok");
    assert!(v["per_type"]["transfer"]["committed"].as_u64().unwrap() > 0);
}

#[test]
fn table_output_names_every_type() {
    let (code, out, err) = phasedb(&[
        "bench",
        "ycsb",
        "--variant",
        "ramp",
        "-t",
        "1",
        "-d",
        "0.2",
        "--warmup",
        "0",
        "--rows",
        "1000",
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    for word in [
        "read-only",
        "write-only",
        "total",
        "txn/s",
        "p999 us",
        "consistency check: ok",
    ] {
        assert!(out.contains(word), "missing {word:?} in:\n{out}");
    }
}

/// Every command in `cases` fails, prints nothing on stdout and names its problem on stderr.
fn all_rejected(cases: &[(&[&str], &str)]) {
    for (args, needle) in cases {
        let (code, out, err) = phasedb(args);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(out.is_empty(), "{args:?} printed to stdout: {out}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
}

#[test]
fn bad_flags_get_clear_errors() {
    let dir = std::env::temp_dir().join(format!("phasedb-cli-nocc-{}", std::process::id()));
    let dir = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "bench",
                "-p",
                "nocc",
                "--data-dir",
                dir,
                "ycsb",
                "--rows",
                "100",
            ],
            "protocol nocc does not support durability",
        ),
        (
            &["bench", "ycsb", "--protocol", "paxos"],
            "invalid value 'paxos'",
        ),
        (
            &["bench", "ycsb", "--threads", "0"],
            "--threads must be between",
        ),
        (&["bench", "ycsb", "--duration=-1"], "--duration must be"),
        (
            &["bench", "ycsb", "--duration", "abc"],
            "invalid value 'abc'",
        ),
        (
            &["bench", "ycsb", "--read-ratio", "1.5"],
            "--read-ratio must be between 0 and 1",
        ),
        (
            &["bench", "ycsb", "--rows", "0"],
            "--rows must be at least 1",
        ),
        (
            &["bench", "ycsb", "--theta", "10"],
            "--theta must be in [0, 10)",
        ),
        (
            &["bench", "ycsb", "--ops", "20", "--rows", "10"],
            "--ops must be between",
        ),
        (
            &["bench", "ycsb", "--variant", "zzz"],
            "invalid value 'zzz'",
        ),
        (
            &["bench", "bank", "--accounts", "1"],
            "--accounts must be at least 2",
        ),
        (
            &["bench", "ycsb", "--protocol", "atomic"],
            "the atomic protocol runs only the increment workloads",
        ),
        (
            &["bench", "incr1", "--hot", "2"],
            "--hot must be between 0 and 1",
        ),
        (&["bench", "incrz", "--alpha", "12"], "--alpha must be"),
        (&["bench", "nosuchworkload"], "unrecognized subcommand"),
        (
            &["experiment", "incr1", "--protocols", "ramp-f"],
            "unknown protocol `ramp-f` in --protocols for incr1",
        ),
        (
            &["experiment", "ramp-clients", "--protocols", "occ"],
            "unknown algorithm `occ` in --protocols for ramp-clients",
        ),
    ];
    all_rejected(cases);
}

#[test]
fn rubis_flags_get_clear_errors_and_a_small_run_passes_its_check() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "rubis", "--mix", "a"], "invalid value 'a'"),
        (
            &["bench", "rubis", "--mix", "c", "--alpha", "10"],
            "--alpha must be",
        ),
        (&["bench", "rubis", "--alpha=-2"], "--alpha must be"),
        (
            &["bench", "rubis", "--users", "1"],
            "--users must be between",
        ),
        (
            &["bench", "rubis", "--items", "0"],
            "--items must be between",
        ),
        (
            &["bench", "rubis", "--regions", "0"],
            "--regions must be between",
        ),
        (
            &["bench", "rubis", "--bids-per-item", "9999"],
            "--bids-per-item",
        ),
        (
            &["bench", "rubis", "--protocol", "atomic"],
            "the atomic protocol runs only the increment workloads",
        ),
    ];
    all_rejected(cases);
    let (code, out, err) = phasedb(&[
        "bench",
        "rubis",
        "--mix",
        "c",
        "--users",
        "2000",
        "--items",
        "500",
        // The harmonic skew, one of the rubis experiment's points.
        "--alpha",
        "1",
        "--protocol",
        "doppel",
        "--threads",
        "2",
        "--duration",
        "0.3",
        "--warmup",
        "0.1",
        "--json",
    ]);
    assert_eq!(code, 0, "stderr: {err}");
    let v = json(&out);
    assert!(v.to_string().contains("store-bid"), "{v}");
}

/// A short contended `append` run writing its history to a fresh file in `format`; returns the text.
fn append_history(protocol: &str, format: &str, extra: &[&str]) -> String {
    let path = std::env::temp_dir().join(format!(
        "phasedb-history-{protocol}-{format}-{}",
        std::process::id()
    ));
    let path_arg = path.to_str().expect("a UTF-8 temporary path");
    let mut args = vec![
        "bench",
        "append",
        "--protocol",
        protocol,
        "--threads",
        "2",
        "--duration",
        "0.05",
        "--warmup",
        "0",
        "--verify",
        "--history",
        path_arg,
        "--history-format",
        format,
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = phasedb(&args);
    assert_eq!(code, 0, "stderr: {err}");
    assert!(out.contains("serializable"), "{out}");
    let text = std::fs::read_to_string(&path).expect("the history was written");
    let _ = std::fs::remove_file(&path);
    text
}

fn adya_check(edn: &str, workload: adya::Workload) -> adya::Valid {
    let h = adya::History::from_edn(edn).expect("adya parses the history");
    let opts = adya::Opts {
        models: vec!["serializable".into()],
        ..adya::Opts::default()
    };
    adya::check(&h, workload, &opts).valid
}

#[test]
fn append_histories_are_written_in_every_format() {
    let edn = append_history("occ", "elle-list-append", &[]);
    let first = edn.lines().next().expect("a first line");
    assert!(
        first.starts_with("{:type :invoke, :f :txn, :value [[:append 0 1] "),
        "the loader comes first: {first}"
    );
    assert_eq!(
        adya_check(&edn, adya::Workload::ListAppend),
        adya::Valid::True
    );
    let reg = append_history("occ", "elle-rw-register", &[]);
    assert_ne!(
        adya_check(&reg, adya::Workload::RwRegister),
        adya::Valid::False
    );
    let text = append_history("doppel", "json", &["--adds", "0.5"]);
    let v = json(&text);
    assert_eq!(v["format"], "phasedb-history");
    assert_eq!(v["protocol"], "doppel");
    assert!(!v["engine"]["txns"].as_array().unwrap().is_empty());
    let observed = v["observed"]["txns"].as_array().unwrap();
    assert!(observed.iter().any(|t| t.to_string().contains("\"add\"")));
    assert_eq!(v["observed"]["loaded"][0], serde_json::json!([0, [1]]));
}

#[test]
fn append_and_history_flags_get_clear_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "append", "--ops", "0"], "--ops must be between"),
        (&["bench", "append", "--keys", "2", "--ops", "3"], "--ops"),
        (
            &["bench", "append", "--read-ratio", "0.7", "--adds", "0.5"],
            "add up to at most 1",
        ),
        (&["bench", "append", "--absent-keys", "9"], "--absent-keys"),
        (&["bench", "append", "--capacity", "0"], "--capacity"),
        (
            &["bench", "bank", "--history-format", "json"],
            "--history-format needs --history",
        ),
        (
            &["bench", "bank", "--history", "/nonexistent-dir/h.edn"],
            "cannot write the history",
        ),
        (
            &[
                "bench",
                "append",
                "--history",
                "h.edn",
                "--history-format",
                "csv",
            ],
            "invalid value 'csv'",
        ),
    ];
    all_rejected(cases);
}
