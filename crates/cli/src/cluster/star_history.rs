//! `phasedb bench ycsb|tpcc --algorithm star ... --verify`: the nodes record their committed
//! histories and append them to a file each as they go (`[star] history`,
//! `phasedb_dist::star::history_log`), so a node killed with `--kill-node` leaves its history up to
//! its death; after the run the benchmark reads every node's file (a failed node's without the
//! phase its failure interrupted), merges them and checks the history is serializable and holds
//! at least every transaction the nodes acknowledged.

use std::path::{Path, PathBuf};
use std::time::Instant;

use phasedb_check::{CheckStats, check_serializable};
use phasedb_dist::star::history_log::read_cluster_history;
use phasedb_net::{Addr, NODE_PLACEHOLDER, StarConfig};
use serde_json::{Value, json};

/// A directory of its own for the history files of a cluster this run starts, and the `history`
/// setting of its `[star]` table.
pub fn history_dir() -> (PathBuf, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("phasedb-history-{}-{nanos}", std::process::id()));
    let file = dir.join(format!("node-{NODE_PLACEHOLDER}.jsonl"));
    (dir, file.display().to_string())
}

/// Every node's history file under `star`'s `history` setting.
pub fn history_files(star: &StarConfig, nodes: usize) -> Option<Vec<PathBuf>> {
    (0..nodes as Addr)
        .map(|n| star.history_of(n))
        .collect::<Option<Vec<_>>>()
}

/// What the check of a run's history found.
pub struct HistoryVerdict {
    /// Transactions in the merged history.
    pub transactions: usize,
    /// Transactions the nodes acknowledged.
    pub acknowledged: u64,
    /// Transactions of failed nodes left out (their failure's phase or later).
    pub dropped: usize,
    /// The failures the files announce: node and interrupted phase.
    pub failures: Vec<(Addr, u64)>,
    /// The serializability check's counts, or why the history fails it (or could not be read).
    pub outcome: Result<CheckStats, String>,
    /// Seconds spent reading and checking.
    pub seconds: f64,
}

impl HistoryVerdict {
    /// Reads the files at `paths` (node `n`'s at `paths[n]`) and checks their history against
    /// `acknowledged` transactions.
    pub fn check(paths: &[PathBuf], acknowledged: u64) -> HistoryVerdict {
        let started = Instant::now();
        let mut verdict = HistoryVerdict {
            transactions: 0,
            acknowledged,
            dropped: 0,
            failures: Vec::new(),
            outcome: Err(String::new()),
            seconds: 0.0,
        };
        verdict.outcome = match read_cluster_history(paths) {
            Err(e) => Err(e),
            Ok(read) => {
                verdict.transactions = read.history.len();
                verdict.dropped = read.dropped;
                verdict.failures = read.failures;
                check_serializable(&read.history).map_err(|a| a.to_string())
            }
        };
        verdict.seconds = started.elapsed().as_secs_f64();
        verdict
    }

    /// Whether the history passed: serializable, and no acknowledged transaction missing.
    pub fn passed(&self) -> bool {
        self.outcome.is_ok() && self.transactions as u64 >= self.acknowledged
    }

    /// The verdict as JSON (`history` in `--json`).
    pub fn json(&self) -> Value {
        json!({
            "transactions": self.transactions,
            "acknowledged": self.acknowledged,
            "dropped": self.dropped,
            "failures": self.failures.iter().map(|(n, p)| json!({"node": n, "phase": p})).collect::<Vec<_>>(),
            "serializable": self.outcome.is_ok(),
            "problem": self.outcome.as_ref().err(),
            "passed": self.passed(),
            "check_s": self.seconds,
        })
    }

    /// The verdict as a line of the table.
    pub fn line(&self) -> String {
        let verdict = match &self.outcome {
            Ok(_) => "serializable".to_string(),
            Err(e) => format!("NOT serializable: {e}"),
        };
        format!(
            "history: {} transactions from every node's file ({} acknowledged, {} of failed nodes \
             left out as of their failure's phase): {verdict}; checked in {:.1} s",
            self.transactions, self.acknowledged, self.dropped, self.seconds
        )
    }

    /// Tells, on stderr, what makes the run fail; whether anything does. `kept`: where the
    /// files are left for a look.
    pub fn fails(&self, kept: Option<&Path>) -> bool {
        if let Err(e) = &self.outcome {
            eprintln!("error: the cluster's history is not serializable: {e}");
        }
        if (self.transactions as u64) < self.acknowledged {
            eprintln!(
                "error: the history holds {} transactions, but the nodes acknowledged {}",
                self.transactions, self.acknowledged
            );
        }
        let fails = !self.passed();
        if fails && let Some(dir) = kept {
            eprintln!("the history files are kept in {}", dir.display());
        }
        fails
    }
}
