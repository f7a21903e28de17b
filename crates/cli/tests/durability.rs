//! Crash tests of durable operation: a real `phasedb bench ... --data-dir` process is killed with
//! SIGKILL at a random moment, restarted on the same directory, and what it reported durable
//! before the kill must be there, with the workload's consistency conditions holding.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TempDir;

fn phasedb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_phasedb"))
}

/// `name=count` pairs after the first `skip` words of `line`.
fn counts(line: &str, skip: usize) -> HashMap<String, u64> {
    line.split_whitespace()
        .skip(skip)
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// What one process printed: the tables it recovered (records per table) and the transactions
/// it last reported durable (per type).
struct Printed {
    recovered: HashMap<String, u64>,
    durable: HashMap<String, u64>,
}

/// Runs `phasedb bench <args> --durable-results --durable-progress` and kills it with SIGKILL
/// `after` its first durable report.
fn run_and_kill(args: &[&str], after: Duration) -> Printed {
    let mut child = phasedb()
        .arg("bench")
        .args(args)
        .args(["--durable-results", "--durable-progress", "--warmup", "0"])
        .args(["--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut recovered = None;
    let mut durable = HashMap::new();
    let mut first = None;
    loop {
        let wait = match first {
            None => Duration::from_secs(120),
            Some(at) => after.saturating_sub(std::time::Instant::now() - at),
        };
        match rx.recv_timeout(wait) {
            Ok(line) if line.starts_with("recovered ") => recovered = Some(counts(&line, 3)),
            Ok(line) if line.starts_with("durable ") => {
                durable = counts(&line, 2);
                first.get_or_insert_with(std::time::Instant::now);
            }
            Ok(line) => panic!("unexpected output: {line}"),
            Err(mpsc::RecvTimeoutError::Timeout) if first.is_some() => break,
            Err(e) => panic!("no durable report from phasedb: {e:?}"),
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // What it printed before it died was reported; what is still in the pipe was too.
    for line in rx.iter() {
        if line.starts_with("durable ") {
            durable = counts(&line, 2);
        }
    }
    reader.join().unwrap();
    Printed {
        recovered: recovered.expect("the process reported what it recovered"),
        durable,
    }
}

/// A short complete run on the recovered directory: its JSON, after checking it succeeded (the
/// workload's consistency check included).
fn run_to_end(args: &[&str]) -> serde_json::Value {
    let out = phasedb()
        .arg("bench")
        .args(args)
        .args(["--warmup", "0", "--duration", "0.2", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["check"], "ok", "{json}");
    json
}

fn seed() -> u64 {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill moments seeded with {s}");
    s
}

fn kill_after(x: &mut u64) -> Duration {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    Duration::from_millis(100 + *x % 500)
}

#[test]
fn tpcc_killed_mid_run_keeps_every_transaction_reported_durable_and_stays_consistent() {
    let dir = TempDir::new("durability-tpcc");
    let d = dir.0.to_str().unwrap();
    let args = [
        "tpcc",
        "--warehouses",
        "1",
        "--threads",
        "2",
        "--data-dir",
        d,
        "--loggers",
        "2",
    ];
    let mut x = seed() | 1;
    let printed = run_and_kill(&args, kill_after(&mut x));
    let (loaded_history, loaded_orders) =
        (printed.recovered["history"], printed.recovered["orders"]);
    assert!(printed.durable["payment"] > 0 && printed.durable["new-order"] > 0);
    // The restart recovers, runs and checks TPC-C's consistency conditions.
    let json = run_to_end(&args);
    let rec = &json["durability"]["recovery"];
    assert_eq!(rec["fresh"], false, "{json}");
    let history = rec["table_records"]["history"].as_u64().unwrap();
    let orders = rec["table_records"]["orders"].as_u64().unwrap();
    // Every Payment inserts a history row and every NewOrder an order (neither is deleted).
    assert!(
        history >= loaded_history + printed.durable["payment"],
        "{history} history rows recovered, {loaded_history} loaded and {} payments reported durable",
        printed.durable["payment"]
    );
    assert!(
        orders >= loaded_orders + printed.durable["new-order"],
        "{orders} orders recovered, {loaded_orders} loaded and {} new orders reported durable",
        printed.durable["new-order"]
    );
}

#[test]
fn bank_killed_mid_run_three_times_keeps_its_total() {
    bank_killed(&[], 3);
}

#[test]
fn bank_under_locking_protocols_killed_mid_run_keeps_its_total() {
    for protocol in ["2pl-waitdie", "2pl-nowait", "2pl", "swisstm", "adaptive"] {
        bank_killed(&["--protocol", protocol], 1);
    }
}

#[test]
fn bank_under_tictoc_and_doppel_killed_mid_run_keeps_its_total() {
    for protocol in ["tictoc", "doppel"] {
        bank_killed(&["--protocol", protocol], 1);
    }
}

/// Kills a durable bank run (with `extra` flags) `rounds` times, each time restarting it on the
/// same directory and checking the total.
fn bank_killed(extra: &[&str], rounds: usize) {
    let name = format!("durability-bank{}", extra.get(1).map_or("", |p| p));
    let dir = TempDir::new(&name);
    let d = dir.0.to_str().unwrap();
    let mut args = vec![
        "bank",
        "--accounts",
        "1000",
        "--threads",
        "2",
        "--data-dir",
        d,
        "--loggers",
        "2",
        // Kills land during background checkpoints too.
        "--checkpoint-interval",
        "0.1",
    ];
    args.extend_from_slice(extra);
    let mut x = seed() | 1;
    for round in 0..rounds {
        let printed = run_and_kill(&args, kill_after(&mut x));
        assert_eq!(
            printed.recovered["accounts"], 1000,
            "round {round} {extra:?}"
        );
        // The restart recovers, runs on and checks the total (and then the next round recovers
        // from the state this run left, written by its clean close).
        let json = run_to_end(&args);
        assert_eq!(json["durability"]["recovery"]["fresh"], false, "{extra:?}");
        assert_eq!(json["durability"]["checkpoints"]["failed"], 0, "{json}");
        assert_eq!(
            json["protocol"],
            extra.get(1).copied().unwrap_or("occ"),
            "{json}"
        );
    }
    if rounds < 3 {
        return;
    }
    // Log truncation: the two newest checkpoints are kept, older ones are deleted.
    let complete = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with("ckpt-") && !n.ends_with(".tmp"))
        .count();
    assert_eq!(complete, 2);
}

/// What one step of [`on_a_small_tmpfs`]'s script left: exit status, stdout, stderr.
struct Step {
    status: i32,
    stdout: String,
    stderr: String,
}

impl Step {
    fn read(dir: &std::path::Path, name: &str) -> Step {
        let text = |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}")));
        Step {
            status: text("status")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("step {name} did not run")),
            stdout: text("out").unwrap_or_default(),
            stderr: text("err").unwrap_or_default(),
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {} / {}", self.stdout, self.stderr))
    }
}

/// A script line running `phasedb bench ARGS` (at most 40 s) as step `name`: its output, error
/// and status go to `$3/name.{out,err,status}` (read back by [`Step::read`]); `then` runs after.
fn bench_step(name: &str, args: &str, then: &str) -> String {
    format!(
        "timeout 40 \"$2\" bench {args} >\"$3/{name}.out\" 2>\"$3/{name}.err\"; \
         echo $? >\"$3/{name}.status\"; {then}\n"
    )
}

/// Exit status of the script when the small filesystem cannot be mounted.
const NO_MOUNT: i32 = 97;

/// Runs `script` (a POSIX shell script) in a private mount namespace (`unshare -rm`: a user
/// namespace in which the caller is root, so no privilege is needed where user namespaces are
/// allowed) after mounting a tmpfs of `size` on `mount`; `$1` is `mount`, `$2` the phasedb
/// binary and `$3` `out`, a directory of the host's for the steps' output. Nothing the script
/// mounts is seen outside. `None` (after saying so on stderr) if the namespace or the tmpfs
/// cannot be made here.
fn on_a_small_tmpfs(
    size: &str,
    mount: &std::path::Path,
    out: &std::path::Path,
    script: &str,
) -> Option<()> {
    let prelude = format!("mount -t tmpfs -o size={size} phasedb-test \"$1\" || exit {NO_MOUNT}\n");
    isolated(
        "-rm",
        &prelude,
        (mount, out),
        script,
        &format!("a {size} tmpfs in a private mount namespace (unshare -rm)"),
    )
}

/// Runs `prelude` then `script` under `unshare FLAGS` (a private mount namespace), `$1`, `$2`
/// and `$3` as in [`on_a_small_tmpfs`]; the prelude makes the filesystems and exits with
/// [`NO_MOUNT`] if it cannot. `None` (after saying on stderr that `what` could not be made, so
/// the behaviour was not checked) if no step ran.
fn isolated(
    flags: &str,
    prelude: &str,
    (mount, out): (&std::path::Path, &std::path::Path),
    script: &str,
    what: &str,
) -> Option<()> {
    std::fs::create_dir_all(mount).unwrap();
    std::fs::create_dir_all(out).unwrap();
    let whole = format!("{prelude}{script}");
    let mut child = match Command::new("unshare")
        .args([flags, "sh", "-c", &whole, "sh"])
        .arg(mount)
        .arg(env!("CARGO_BIN_EXE_phasedb"))
        .arg(out)
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: cannot run unshare to make {what}: {e}; NOT checked");
            return None;
        }
    };
    // Every step of the script has its own `timeout`; this bounds the whole.
    let until = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= until {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the script on {what} ran for more than 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    match status.code() {
        Some(0) => Some(()),
        // `unshare` itself fails with 1; no step ran, so `out` is empty.
        Some(NO_MOUNT | 1) if std::fs::read_dir(out).unwrap().next().is_none() => {
            eprintln!("skipped: cannot make {what} ({status}); the behaviour was NOT checked");
            None
        }
        _ => panic!("the script on {what} failed: {status}"),
    }
}

/// Asserts that run `fill` stopped with status 1 when logging failed, its error and JSON naming
/// `reason`; returns its JSON and what it reported on stderr: the rows it loaded and the
/// transactions it acknowledged durable (some), per table and per type.
fn stopped_on(
    fill: &Step,
    reason: &str,
) -> (
    serde_json::Value,
    HashMap<String, u64>,
    HashMap<String, u64>,
) {
    assert_eq!(fill.status, 1, "{}", fill.stderr);
    assert!(
        fill.stderr.contains("logging failed") && fill.stderr.contains(reason),
        "{}",
        fill.stderr
    );
    let json = fill.json();
    let failure = json["durability"]["logging_failure"].as_str().unwrap_or("");
    assert!(failure.contains(reason), "{json}");
    let mut recovered = None;
    let mut durable = HashMap::new();
    for line in fill.stderr.lines() {
        if line.starts_with("recovered ") {
            recovered = Some(counts(line, 3));
        } else if line.starts_with("durable ") {
            durable = counts(line, 2);
        }
    }
    let loaded = recovered.expect("the run reported what it loaded");
    assert!(
        durable["payment"] > 0 && durable["new-order"] > 0,
        "{durable:?}"
    );
    (json, loaded, durable)
}

/// Asserts that the restart `grown` recovered from the first checkpoint and its logs every
/// transaction reported durable (`loaded` rows plus `durable` per type) and passed TPC-C's
/// check; returns its recovery's figures.
fn assert_recovered(
    grown: &Step,
    loaded: &HashMap<String, u64>,
    durable: &HashMap<String, u64>,
) -> serde_json::Value {
    assert_eq!(grown.status, 0, "{}", grown.stderr);
    let json = grown.json();
    assert_eq!(json["check"], "ok", "{json}");
    let rec = &json["durability"]["recovery"];
    assert_eq!(rec["fresh"], false, "{json}");
    assert_eq!(rec["checkpoint"], 1, "{json}");
    assert_eq!(rec["skipped_checkpoints"], serde_json::json!([]), "{json}");
    let history = rec["table_records"]["history"].as_u64().unwrap();
    let orders = rec["table_records"]["orders"].as_u64().unwrap();
    assert!(
        history >= loaded["history"] + durable["payment"],
        "{history} history rows recovered, {} loaded and {} payments reported durable",
        loaded["history"],
        durable["payment"]
    );
    assert!(
        orders >= loaded["orders"] + durable["new-order"],
        "{orders} orders recovered, {} loaded and {} new orders reported durable",
        loaded["orders"],
        durable["new-order"]
    );
    rec.clone()
}

/// The names in `dir` (listed by the script into `file`) of complete checkpoints and of
/// unfinished ones.
fn checkpoints_listed(file: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(file).unwrap();
    let ckpts = text.lines().filter(|n| n.starts_with("ckpt-"));
    let (tmp, done): (Vec<_>, Vec<_>) = ckpts.map(String::from).partition(|n| n.ends_with(".tmp"));
    (done, tmp)
}

/// On a filesystem that really fills up (a small tmpfs), a durable TPC-C run stops with an error
/// naming the full disk and a non-zero status, acknowledging nothing it could not log; a checkpoint
/// that does not fit fails and leaves the previous one usable; a restart on the still full disk
/// fails the same way, and once the filesystem grows, a restart recovers every transaction the
/// first run reported durable, and TPC-C's consistency conditions hold.
#[test]
fn tpcc_on_a_disk_that_fills_stops_with_an_error_and_recovers_what_it_reported_durable() {
    let root = TempDir::new("durability-full-disk");
    let (mount, out) = (root.0.join("data"), root.0.join("out"));
    // 1 warehouse: its first checkpoint is about 90 MB; 128 MB leaves the log some 35 MB, a
    // second or two of TPC-C, and no room for a second checkpoint (one is due every 0.3 s).
    let bench = "tpcc --warehouses 1 --threads 2 --loggers 2 --data-dir \"$1\" --warmup 0";
    let step = |name: &str, flags: &str| {
        bench_step(
            name,
            &format!("{bench} {flags}"),
            &format!("ls \"$1\" >\"$3/{name}.ls\""),
        )
    };
    let script = [
        step(
            "fill",
            "--checkpoint-interval 0.3 --durable-results --durable-progress --duration 20 --json",
        ),
        step("full", "--duration 0.2 --json"),
        "mount -o remount,size=512m \"$1\" || exit 98\n".to_string(),
        step("grown", "--duration 0.2 --json"),
    ]
    .concat();
    if on_a_small_tmpfs("128m", &mount, &out, &script).is_none() {
        return;
    }

    // The run stopped at the full disk with an error and a non-zero status, having reported
    // durable transactions before the disk filled (the size leaves room for some).
    let (json, loaded, durable) = stopped_on(&Step::read(&out, "fill"), "No space left on device");
    // Checkpoints were due during the run; none fitted on the full disk (one under way fails
    // on it or is interrupted when the run stops), and an unfinished one is no complete
    // checkpoint: the first stays the newest. A failed checkpoint removes its unfinished image
    // (it would hold the space the log needs).
    assert_eq!(json["durability"]["checkpoints"]["taken"], 0, "{json}");
    let (done, unfinished) = checkpoints_listed(&out.join("fill.ls"));
    assert_eq!(done, ["ckpt-00000001"], "{json}");
    assert!(unfinished.is_empty(), "{unfinished:?}");

    // A restart on the full disk recovers, cannot write the recovered state's checkpoint (its
    // image fails half written) and says why; it leaves the checkpoints as they were.
    let full = Step::read(&out, "full");
    assert_ne!(full.status, 0, "{}", full.stderr);
    assert!(
        full.stderr.contains("did not start")
            && full.stderr.contains("ckpt-00000002.tmp")
            && full.stderr.contains("No space left on device"),
        "{}",
        full.stderr
    );
    let (done, unfinished) = checkpoints_listed(&out.join("full.ls"));
    assert_eq!(done, ["ckpt-00000001"]);
    assert!(unfinished.is_empty(), "{unfinished:?}");

    // Grown, the filesystem takes the restart: recovery from the first checkpoint and the logs
    // brings back every transaction reported durable, and the consistency check holds.
    let rec = assert_recovered(&Step::read(&out, "grown"), &loaded, &durable);
    eprintln!(
        "full disk: {} payments and {} new orders reported durable; recovered {} log records, \
         {} dropped past the durable epoch, {} torn bytes cut",
        durable["payment"],
        durable["new-order"],
        rec["log_records"],
        rec["dropped_records"],
        rec["torn_bytes"]
    );
}

/// A failed fsync on a real device: the log's filesystem (ext4 on a loop device) takes every
/// write into its page cache, but its device sits on a tmpfs too small to hold them, so writing
/// the pages back fails and the error comes out of the logger's fsync. The run stops at once,
/// naming the fsync, with a non-zero status and nothing acknowledged that was not durable; once
/// the device's backing grows and `e2fsck` repaired what the aborted journal left, a restart
/// recovers every transaction the run reported durable, and TPC-C's consistency conditions hold.
/// Loop devices and ext4 need real root (no user namespace can mount them): elsewhere the test
/// says it was skipped.
#[test]
fn tpcc_whose_log_fsync_fails_stops_with_an_error_and_recovers_what_it_reported_durable() {
    let root = TempDir::new("durability-failed-fsync");
    let (mount, out) = (root.0.join("mnt"), root.0.join("out"));
    // The first checkpoint (about 90 MB) fits the 200 MB backing; the log fills the rest within
    // a second or two. The ext4 image says 1 GB, so no write is refused. `mount -o loop` makes a
    // loop device that is freed when its mount goes, with the namespace if the script dies.
    let prelude = format!(
        "mkdir -p \"$1/back\" \"$1/data\" || exit {NO_MOUNT}\n\
         mount -t tmpfs -o size=200m phasedb-test \"$1/back\" || exit {NO_MOUNT}\n\
         truncate -s 1G \"$1/back/disk.img\" || exit {NO_MOUNT}\n\
         mkfs.ext4 -q -F \"$1/back/disk.img\" || exit {NO_MOUNT}\n\
         mount -t ext4 -o loop \"$1/back/disk.img\" \"$1/data\" || exit {NO_MOUNT}\n"
    );
    // One logger: the first failure is the fsync's (a second logger could meet the read-only
    // filesystem the aborted journal leaves in a write first).
    let bench = "tpcc --warehouses 1 --threads 2 --loggers 1 --data-dir \"$1/data/db\" --warmup 0";
    let step = |name: &str, flags: &str| bench_step(name, &format!("{bench} {flags}"), "true");
    let script = [
        step(
            "fill",
            "--durable-results --durable-progress --duration 20 --json",
        ),
        "umount \"$1/data\" || exit 98\n".to_string(),
        "mount -o remount,size=2g \"$1/back\" || exit 98\n".to_string(),
        // 0: clean, 1: errors corrected.
        "e2fsck -fy \"$1/back/disk.img\" >\"$3/fsck\" 2>&1; [ $? -le 1 ] || exit 98\n".to_string(),
        "mount -t ext4 -o loop \"$1/back/disk.img\" \"$1/data\" || exit 98\n".to_string(),
        step("grown", "--duration 0.2 --json"),
        "umount \"$1/data\"\n".to_string(),
    ]
    .concat();
    let what = "an ext4 loop device on a small tmpfs (unshare -m, as root)";
    if isolated("-m", &prelude, (&mount, &out), &script, what).is_none() {
        return;
    }

    let (json, loaded, durable) = stopped_on(&Step::read(&out, "fill"), "fsync failed");
    let failure = json["durability"]["logging_failure"].as_str().unwrap_or("");
    let rec = assert_recovered(&Step::read(&out, "grown"), &loaded, &durable);
    eprintln!(
        "failed fsync ({failure}): {} payments and {} new orders reported durable; recovered {} \
         log records, {} dropped past the durable epoch, {} torn bytes cut",
        durable["payment"],
        durable["new-order"],
        rec["log_records"],
        rec["dropped_records"],
        rec["torn_bytes"]
    );
}
