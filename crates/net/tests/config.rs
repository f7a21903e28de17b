//! Cluster files: valid ones parse with the intended placement; bad ones get a clear error.

use phasedb_net::{ClusterConfig, ConfigError, partition_of};

const GOOD: &str = r#"
partitions = 4
[[nodes]]
id = 0
addr = "127.0.0.1:7100"
partitions = [0, 2]
[[nodes]]
id = 1
addr = "127.0.0.1:7101"
partitions = [1, 3]
[server]
gc_window_ms = 2000
[net]
delay_us = 100
poll_us = 20
"#;

fn err(text: &str) -> String {
    match ClusterConfig::from_toml(text) {
        Ok(_) => panic!("accepted a bad config:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_valid_file_parses_with_its_placement_and_round_trips() {
    let c = ClusterConfig::from_toml(GOOD).unwrap();
    assert_eq!(c.partitions, 4);
    assert_eq!(c.placement, vec![0, 1, 0, 1]);
    assert_eq!(c.server.gc_window_ms, 2000);
    assert_eq!(
        c.server.ctp_timeout_ms, 1000,
        "unspecified settings take defaults"
    );
    assert_eq!(c.net.delay_us, 100);
    assert_eq!(c.poll(), std::time::Duration::from_micros(20));
    for key in 0..1000u64 {
        assert_eq!(
            c.node_of_key(key),
            c.placement[partition_of(key, 4) as usize]
        );
    }
    let again = ClusterConfig::from_toml(&c.to_toml()).unwrap();
    assert_eq!(again, c);
}

#[test]
fn partitions_default_to_one_per_node_round_robin() {
    let c = ClusterConfig::from_toml(
        "[[nodes]]\nid = 1\naddr = \"127.0.0.1:2\"\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    assert_eq!(c.partitions, 2);
    assert_eq!(c.nodes[0].partitions, vec![0]);
    assert_eq!(c.nodes[1].addr.port(), 2);
}

#[test]
fn inconsistent_files_are_refused_with_the_reason() {
    let two = |a: &str, b: &str| {
        format!("[[nodes]]\nid = 0\naddr = \"{a}\"\n[[nodes]]\nid = 1\naddr = \"{b}\"\n")
    };
    assert!(err("").contains("at least one node"));
    assert!(err(&two("127.0.0.1:1", "127.0.0.1:1")).contains("used by another node"));
    assert!(err(&two("127.0.0.1:1", "localhost:2")).contains("not ip:port"));
    assert!(err(&two("127.0.0.1:0", "127.0.0.1:2")).contains("port 0"));
    assert!(
        err(
            "[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:2\"\n"
        )
        .contains("share an id")
    );
    assert!(err("[[nodes]]\nid = 3\naddr = \"127.0.0.1:1\"\n").contains("0..0"));
    assert!(
        err(&format!(
            "partitions = 0\n{}",
            two("127.0.0.1:1", "127.0.0.1:2")
        ))
        .contains("at least 1")
    );
    let placed = |p0: &str, p1: &str| {
        format!(
            "partitions = 3\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\npartitions = {p0}\n[[nodes]]\nid = 1\naddr = \"127.0.0.1:2\"\npartitions = {p1}\n"
        )
    };
    assert!(err(&placed("[0, 1]", "[1, 2]")).contains("partition 1 is placed on both"));
    assert!(err(&placed("[0]", "[1]")).contains("partition 2 is not placed"));
    assert!(err(&placed("[0, 5]", "[1, 2]")).contains("only 3"));
    assert!(err("partitions = 2\n[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\npartitions = [0, 1]\n[[nodes]]\nid = 1\naddr = \"127.0.0.1:2\"\n")
        .contains("all or none"));
    assert!(
        err(&format!(
            "{}[net]\npoll_us = 20000\n",
            two("127.0.0.1:1", "127.0.0.1:2")
        ))
        .contains("poll_us must be at most 10 ms")
    );
    assert!(
        err(&format!(
            "{}[server]\ngc_window_ms = 0\n",
            two("127.0.0.1:1", "127.0.0.1:2")
        ))
        .contains("positive")
    );
    assert!(
        err(&format!(
            "{}[server]\nlock_lease_ms = 0\n",
            two("127.0.0.1:1", "127.0.0.1:2")
        ))
        .contains("lock_lease_ms")
    );
    assert!(
        err(&format!(
            "{}[server]\ntick_ms = 5000\n",
            two("127.0.0.1:1", "127.0.0.1:2")
        ))
        .contains("tick_ms")
    );
    assert!(
        err(
            &format!("{}colour = 1\n", two("127.0.0.1:1", "127.0.0.1:2"))
                .replace("[[nodes]]\nid = 0", "colour = 1\n[[nodes]]\nid = 0")
        )
        .contains("invalid cluster file")
    );
    assert!(
        err("[[nodes]]\nid = \"zero\"\naddr = \"127.0.0.1:1\"\n").contains("invalid cluster file")
    );
    assert!(err("this is not toml").contains("invalid cluster file"));
}

#[test]
fn a_missing_file_names_the_path() {
    let e = ClusterConfig::load(std::path::Path::new("/nonexistent/cluster.toml")).unwrap_err();
    assert!(matches!(e, ConfigError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/cluster.toml"));
}

const STAR: &str = r#"
[[nodes]]
id = 0
addr = "127.0.0.1:7100"
[[nodes]]
id = 1
addr = "127.0.0.1:7101"
[[nodes]]
id = 2
addr = "127.0.0.1:7102"
[star]
partitions = 4
cross_partition = 0.2
iteration_ms = 5
"#;

#[test]
fn a_star_table_parses_with_defaults_and_round_trips() {
    let c = ClusterConfig::from_toml(STAR).unwrap();
    let star = c.star.clone().expect("a [star] table");
    assert_eq!(star.partitions, 4);
    assert_eq!(star.full_replicas, 1);
    assert_eq!(star.replicas_per_partition, 2);
    assert_eq!(star.workers, 1);
    assert!(star.hybrid_replication);
    assert_eq!(star.iteration(), std::time::Duration::from_millis(5));
    assert_eq!(star.placement, None);
    assert_eq!(c.partitions, 3, "RAMP's partitions keep their own default");
    assert_eq!(ClusterConfig::from_toml(&c.to_toml()).unwrap(), c);
    let explicit = format!("{STAR}placement = [[1, 0], [2, 0], [1, 0], [2, 0]]\n");
    let c = ClusterConfig::from_toml(&explicit).unwrap();
    assert_eq!(
        c.star.as_ref().unwrap().placement.as_ref().unwrap()[1],
        vec![2, 0]
    );
    assert_eq!(ClusterConfig::from_toml(&c.to_toml()).unwrap(), c);
    assert_eq!(
        ClusterConfig::from_toml(GOOD).unwrap().star,
        None,
        "files without [star] are unchanged"
    );
}

#[test]
fn a_star_tables_workload_and_seed_round_trip() {
    let c = ClusterConfig::from_toml(STAR).unwrap();
    let star = c.star.as_ref().unwrap();
    assert_eq!((star.workload.as_deref(), star.seed), (None, 1));
    assert!(star.workload_args.is_empty());
    let text =
        format!("{STAR}workload = \"tpcc\"\nworkload_args = [\"--mix\", \"payment\"]\nseed = 9\n");
    let c = ClusterConfig::from_toml(&text).unwrap();
    let star = c.star.as_ref().unwrap();
    assert_eq!(star.workload.as_deref(), Some("tpcc"));
    assert_eq!(star.workload_args, ["--mix", "payment"]);
    assert_eq!(star.seed, 9);
    assert_eq!(ClusterConfig::from_toml(&c.to_toml()).unwrap(), c);
}

#[test]
fn bad_star_tables_are_refused_with_the_field() {
    let nodes_and_table = &STAR[..STAR.find("[star]\n").unwrap() + "[star]\n".len()];
    let with = |extra: &str| format!("{nodes_and_table}{extra}\n");
    for (extra, expect) in [
        ("partitions = 0", "partitions must be 1..=65536"),
        (
            "partitions = 4\nfull_replicas = 0",
            "full_replicas must be at least 1",
        ),
        (
            "partitions = 4\nfull_replicas = 4",
            "full_replicas = 4 but the cluster has 3 nodes",
        ),
        (
            "partitions = 4\nreplicas_per_partition = 4",
            "replicas_per_partition must be 1..=3",
        ),
        ("partitions = 4\nworkers = 0", "workers must be 1..=1024"),
        (
            "partitions = 4\niteration_ms = 0",
            "iteration_ms must be 0.1..=60000",
        ),
        (
            "partitions = 4\ncross_partition = 1.5",
            "cross_partition must be between 0 and 1",
        ),
        (
            "partitions = 4\nplacement = [[1, 0]]",
            "placement lists 1 partitions",
        ),
        (
            "partitions = 2\nplacement = [[1, 0], [7, 0]]",
            "placement of partition 1 names node 7",
        ),
        ("partitions = 4\nreplicas = 2", "unknown field"),
    ] {
        let e = err(&with(extra));
        assert!(e.contains(expect), "{extra:?}: got {e:?}");
    }
    let e = err(&STAR.replace("partitions = 4\n", ""));
    assert!(e.contains("missing field `partitions`"), "{e}");
}

#[test]
fn star_failure_detection_settings_are_checked() {
    let star = |extra: &str| {
        format!(
            "[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n[[nodes]]\nid = 1\naddr = \"127.0.0.1:2\"\n\
             [star]\npartitions = 2\nreplicas_per_partition = 2\n{extra}"
        )
    };
    let c = ClusterConfig::from_toml(&star("")).unwrap();
    let s = c.star.as_ref().unwrap();
    assert_eq!((s.heartbeat_ms, s.failure_timeout_ms), (50.0, 1000.0));
    let c = ClusterConfig::from_toml(&star("heartbeat_ms = 5\nfailure_timeout_ms = 40\n")).unwrap();
    assert_eq!(c.star.unwrap().failure_timeout_ms, 40.0);
    assert!(
        err(&star("heartbeat_ms = 50\nfailure_timeout_ms = 50\n"))
            .contains("must be above 0 and below failure_timeout_ms")
    );
}

/// `text` with a top-level `data_dir` (before any table, as TOML requires).
fn with_data_dir(dir: &str, text: &str) -> String {
    format!("data_dir = {dir:?}\n{text}")
}

#[test]
fn data_dir_is_refused_for_every_algorithm_whose_nodes_do_not_commit_through_the_logged_path() {
    let cases = [
        (GOOD.to_string(), "RAMP"),
        (STAR.to_string(), "star:"),
        (
            STAR.replace("[star]\n", "[star]\nalgorithm = \"pb-occ\"\n"),
            "pb-occ:",
        ),
        (
            STAR.replace("[star]\n", "[star]\nalgorithm = \"dist-occ\"\n"),
            "dist-occ:",
        ),
        (
            STAR.replace("[star]\n", "[star]\nalgorithm = \"dist-s2pl\"\n"),
            "dist-s2pl:",
        ),
        (
            STAR.replace("[star]\n", "[star]\nalgorithm = \"calvin\"\n"),
            "calvin:",
        ),
        (
            "[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n[pdur]\npartitions = 2\n".to_string(),
            "P-DUR",
        ),
    ];
    for (text, algorithm) in cases {
        ClusterConfig::from_toml(&text).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
        let e = err(&with_data_dir("/var/phasedb/{node}", &text));
        assert!(
            e.contains("data_dir is not supported") && e.contains(algorithm),
            "{algorithm}: {e}"
        );
        assert!(e.contains("logged commit path"), "{algorithm}: {e}");
    }
    let calvin = err(&with_data_dir(
        "/d/{node}",
        &STAR.replace("[star]\n", "[star]\nalgorithm = \"calvin\"\n"),
    ));
    assert!(calvin.contains("input log"), "{calvin}");
}

#[test]
fn data_dir_needs_a_node_placeholder_with_several_nodes_and_is_not_empty() {
    let e = err(&with_data_dir("/var/phasedb", STAR));
    assert!(e.contains("must contain {node}"), "{e}");
    assert!(err(&with_data_dir(" ", STAR)).contains("data_dir is empty"));
}

#[test]
fn data_dir_of_puts_each_node_id_in_the_placeholder() {
    let mut c = ClusterConfig::from_toml(STAR).unwrap();
    assert_eq!(c.data_dir_of(1), None, "no data_dir: no directory");
    c.data_dir = Some("/d/node-{node}/log".into());
    assert_eq!(
        c.data_dir_of(2),
        Some(std::path::PathBuf::from("/d/node-2/log"))
    );
    let back = ClusterConfig::from_toml(&c.to_toml());
    assert!(
        back.is_err_and(|e| e.to_string().contains("star:")),
        "a written data_dir is read back and checked"
    );
}

#[test]
fn a_star_history_file_names_each_node_and_round_trips() {
    let with = |history: &str, algorithm: &str| {
        STAR.replace(
            "[star]\n",
            &format!("[star]\nhistory = {history:?}\nalgorithm = {algorithm:?}\n"),
        )
    };
    let c = ClusterConfig::from_toml(STAR).unwrap();
    assert_eq!(
        c.star.as_ref().unwrap().history_of(0),
        None,
        "off by default"
    );
    let c = ClusterConfig::from_toml(&with("/h/node-{node}.jsonl", "star")).unwrap();
    let star = c.star.as_ref().unwrap();
    assert_eq!(
        star.history_of(1),
        Some(std::path::PathBuf::from("/h/node-1.jsonl"))
    );
    let back = ClusterConfig::from_toml(&c.to_toml()).unwrap();
    assert_eq!(back.star, c.star, "a written history is read back");
    assert!(err(&with("/h/all.jsonl", "star")).contains("must contain {node}"));
    assert!(err(&with(" ", "star")).contains("history is empty"));
    assert!(err(&with("/h/{node}", "calvin")).contains("not Calvin's"));
    ClusterConfig::from_toml(&with("/h/{node}", "dist-occ")).unwrap();
}

const PDUR: &str = "[[nodes]]\nid = 0\naddr = \"127.0.0.1:1\"\n[pdur]\npartitions = 2\n";

#[test]
fn the_pdur_rebroadcast_delay_defaults_to_1200_ms_and_round_trips() {
    let c = ClusterConfig::from_toml(PDUR).unwrap();
    let pdur = c.pdur.as_ref().expect("a [pdur] table");
    assert_eq!(
        pdur.rebroadcast_ms, 1200,
        "today's delay: twice the 600 ms re-proposal"
    );
    let set = ClusterConfig::from_toml(&format!("{PDUR}rebroadcast_ms = 250\n")).unwrap();
    assert_eq!(set.pdur.as_ref().unwrap().rebroadcast_ms, 250);
    let back = ClusterConfig::from_toml(&set.to_toml()).unwrap();
    assert_eq!(back.pdur.unwrap().rebroadcast_ms, 250);
}

#[test]
fn a_zero_or_absurd_pdur_rebroadcast_delay_is_refused_naming_the_field() {
    for bad in ["0", "600001", "9223372036854775807"] {
        let e = err(&format!("{PDUR}rebroadcast_ms = {bad}\n"));
        assert!(
            e.contains("[pdur] rebroadcast_ms must be 1..=600000") && e.contains(bad),
            "{bad}: {e}"
        );
    }
    ClusterConfig::from_toml(&format!("{PDUR}rebroadcast_ms = 600000\n")).expect("ten minutes");
    let e = err(&format!("{PDUR}rebroadcast_ms = -5\n"));
    assert!(e.contains("rebroadcast_ms"), "{e}");
}

#[test]
fn the_pdur_snapshot_chunk_size_defaults_to_1_mib_round_trips_and_refuses_what_cannot_work() {
    let c = ClusterConfig::from_toml(PDUR).unwrap();
    assert_eq!(c.pdur.as_ref().unwrap().snapshot_chunk_bytes, 1 << 20);
    let set = ClusterConfig::from_toml(&format!("{PDUR}snapshot_chunk_bytes = 65536\n")).unwrap();
    assert_eq!(set.pdur.as_ref().unwrap().snapshot_chunk_bytes, 65536);
    let back = ClusterConfig::from_toml(&set.to_toml()).unwrap();
    assert_eq!(back.pdur.unwrap().snapshot_chunk_bytes, 65536);
    let most = phasedb_net::wire::MAX_FRAME / 2;
    ClusterConfig::from_toml(&format!("{PDUR}snapshot_chunk_bytes = {most}\n"))
        .expect("half a frame");
    for bad in ["0".to_string(), "65535".into(), (most + 1).to_string()] {
        let e = err(&format!("{PDUR}snapshot_chunk_bytes = {bad}\n"));
        assert!(
            e.contains("[pdur] snapshot_chunk_bytes must be 65536..=") && e.contains(&bad),
            "{bad}: {e}"
        );
    }
}
