//! A node's committed history kept outside its process as it goes, so that the history of a node
//! killed with SIGKILL survives up to its death, and the reading of every node's file back into
//! one history that the checkers take (issue 35: "the committed history is serializable" on real
//! processes).
//!
//! **Writing.** A node whose `[star]` table names a `history` file
//! ([`phasedb_net::StarConfig::history_of`]) records its committed transactions, and its host
//! (`serve`) appends them to the file in JSON lines ([`Line`]):
//! - a [`Line::Start`] when the process starts (after a newline, so a line a killed process tore
//!   ends before it), with the node's incarnation;
//! - a [`Line::Phase`] per phase with the transactions that committed in it, which a STAR node
//!   hands over at the phase's start fence ([`StarNode::take_recorded`]). The host writes it
//!   after the event in which the fence started, before the TCP runtime sends any message of
//!   that event, so before the node's end fence can leave and the phase become irrevocable: a
//!   node killed after a fence has left that phase's line. The baselines (no fail-over) and the
//!   fall-back to Dist-OCC hand over what committed after every event, tagged with the current
//!   group;
//! - a [`Line::Failed`] for each failure the node hears announced, with the phase it interrupted
//!   (§7.1);
//! - at a clean stop, whatever committed since the last line.
//!
//! Each line is one `write` of an unbuffered file opened for appending; nothing is synced (a
//! SIGKILL loses nothing already written, as the kernel holds it). Recording is off unless the
//! table names a file: no worker records and no host wraps the node.
//!
//! **Reading** ([`read_cluster_history`]). Each file splits into its processes' segments at the
//! start lines. A failed node's transactions of the phase its failure interrupted were never
//! acknowledged and the live replicas took back their writes (§7.1, `failover`), so for the
//! `k`-th failure of a node (in the phases the survivors' files announce) the node's `k`-th
//! segment loses every transaction that read or wrote a version of that phase or a later one —
//! the rule `sim_star_failover.rs` applies in the simulator. A segment of a failed node may end
//! in a torn line (killed during a write, always of the interrupted phase or later); anywhere
//! else a line that does not parse is an error. Transaction ids are made unique across nodes and
//! processes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use phasedb_check::{History, TxnEvent};
use phasedb_net::Addr;
use phasedb_txn::tid::{epoch_of, tid};

use crate::star::baselines::{DistNode, PbOccNode};
use crate::star::msg::{Phase, StarMsg};
use crate::star::node::StarNode;
use phasedb_net::{Node, Transport};
use phasedb_txn::Procedures;
use serde::de::DeserializeOwned;

/// One line of a history file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// A process of the node started.
    Start {
        /// The node.
        node: Addr,
        /// The process's incarnation (`StarSettings::incarnation`).
        incarnation: u64,
    },
    /// Transactions that committed on the node in a phase (or, under the fall-back and on the
    /// baselines, up to a group commit).
    Phase {
        /// The phase.
        phase: Phase,
        /// The transactions.
        txns: Vec<TxnEvent>,
    },
    /// The node heard that `node` failed, its failure interrupting `phase`.
    Failed {
        /// The failed node.
        node: Addr,
        /// The phase its failure interrupted.
        phase: Phase,
    },
}

/// A node whose committed transactions its host takes as they are handed over.
pub trait Recording {
    /// Asks the node to hand its history over as it goes (its host takes it).
    fn hand_over(&mut self) {}
    /// What was handed over since the last call, with the phase of each part.
    fn take_recorded(&mut self) -> Vec<(Phase, History)>;
    /// Whatever committed and was not handed over yet (at a clean stop), with the current phase.
    fn take_rest(&mut self) -> (Phase, History);
    /// The failures announced so far, with the phases they interrupted.
    fn failures_seen(&self) -> &[(Addr, Phase)] {
        &[]
    }
}

impl<W> Recording for StarNode<'_, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    fn hand_over(&mut self) {
        self.hand_over_history();
    }

    fn take_recorded(&mut self) -> Vec<(Phase, History)> {
        StarNode::take_recorded(self)
    }

    fn take_rest(&mut self) -> (Phase, History) {
        (self.phase(), self.take_history())
    }

    fn failures_seen(&self) -> &[(Addr, Phase)] {
        self.failures()
    }
}

impl<W> Recording for PbOccNode<'_, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    fn take_recorded(&mut self) -> Vec<(Phase, History)> {
        let h = self.take_history();
        if h.is_empty() {
            Vec::new()
        } else {
            vec![(self.group(), h)]
        }
    }

    fn take_rest(&mut self) -> (Phase, History) {
        (self.group(), self.take_history())
    }
}

impl<W> Recording for DistNode<'_, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    fn take_recorded(&mut self) -> Vec<(Phase, History)> {
        let h = self.take_history();
        if h.is_empty() {
            Vec::new()
        } else {
            vec![(self.completed_group() + 1, h)]
        }
    }

    fn take_rest(&mut self) -> (Phase, History) {
        (self.completed_group() + 1, self.take_history())
    }
}

/// Appends one node's lines to its history file.
pub struct HistoryWriter {
    file: File,
    path: PathBuf,
    failures: usize,
}

impl HistoryWriter {
    /// Opens (creating it if need be) node `node`'s file at `path` for appending and writes the
    /// start line of this process, `incarnation`.
    pub fn open(path: &Path, node: Addr, incarnation: u64) -> std::io::Result<HistoryWriter> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let mut w = HistoryWriter {
            file,
            path: path.to_path_buf(),
            failures: 0,
        };
        // The newline ends a line a killed process of the node may have torn.
        w.write(&Line::Start { node, incarnation }, true)?;
        Ok(w)
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&mut self, line: &Line, newline_first: bool) -> std::io::Result<()> {
        let mut text = if newline_first {
            String::from("\n")
        } else {
            String::new()
        };
        text.push_str(&serde_json::to_string(line).map_err(std::io::Error::other)?);
        text.push('\n');
        self.file.write_all(text.as_bytes())
    }

    /// Appends `txns`, committed in `phase` (nothing if there are none).
    pub fn phase(&mut self, phase: Phase, txns: History) -> std::io::Result<()> {
        if txns.is_empty() {
            return Ok(());
        }
        self.write(
            &Line::Phase {
                phase,
                txns: txns.txns,
            },
            false,
        )
    }

    /// Appends what `node` handed over, and the failures announced since the last call.
    pub fn take_from<N: Recording>(&mut self, node: &mut N) -> std::io::Result<()> {
        for (phase, h) in node.take_recorded() {
            self.phase(phase, h)?;
        }
        let failures = node.failures_seen();
        if failures.len() > self.failures {
            let new: Vec<(Addr, Phase)> = failures[self.failures..].to_vec();
            self.failures = failures.len();
            for (failed, phase) in new {
                self.write(
                    &Line::Failed {
                        node: failed,
                        phase,
                    },
                    false,
                )?;
            }
        }
        Ok(())
    }
}

/// A node wrapped by its host so that what it hands over reaches its history file after each
/// event, before the TCP runtime sends that event's messages. A write that fails stops the node
/// ([`Node::is_done`]); [`Recorder::finish`] then returns the error.
pub struct Recorder<'a, N> {
    node: &'a mut N,
    writer: HistoryWriter,
    error: Option<std::io::Error>,
}

impl<'a, N: Recording> Recorder<'a, N> {
    /// `node`, writing to `writer`.
    pub fn new(node: &'a mut N, writer: HistoryWriter) -> Self {
        node.hand_over();
        Recorder {
            node,
            writer,
            error: None,
        }
    }

    fn take(&mut self) {
        if self.error.is_none()
            && let Err(e) = self.writer.take_from(self.node)
        {
            self.error = Some(e);
        }
    }

    /// After the node stopped: writes what it had not handed over yet, or returns the write that
    /// failed.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.take();
        if let Some(e) = self.error {
            return Err(std::io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", self.writer.path.display()),
            ));
        }
        let (phase, rest) = self.node.take_rest();
        self.writer.phase(phase, rest)
    }
}

impl<N: Recording + Node<Msg = StarMsg>> Node for Recorder<'_, N> {
    type Msg = StarMsg;

    fn on_start<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.node.on_start(net);
        self.take();
    }

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        self.node.on_message(net, from, msg);
        self.take();
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.node.on_tick(net);
        self.take();
    }

    fn is_done(&self) -> bool {
        self.error.is_some() || self.node.is_done()
    }

    fn busy(&self) -> bool {
        self.node.busy()
    }
}

/// The phase (epoch) a version was written in.
pub fn phase_of(version: u64) -> Phase {
    epoch_of(tid(version))
}

/// Every node's history read back from its file.
#[derive(Clone, Debug, Default)]
pub struct ClusterHistory {
    /// The merged history: every node's committed transactions but those a failure took back.
    pub history: History,
    /// The failures the files announce: each failed node with the phase it interrupted.
    pub failures: Vec<(Addr, Phase)>,
    /// Transactions of failed nodes left out as of the phase their failure interrupted.
    pub dropped: usize,
    /// Per file, the transactions kept.
    pub per_node: Vec<usize>,
}

/// One process's part of a file.
#[derive(Default)]
struct Segment {
    txns: Vec<TxnEvent>,
    /// The last line did not parse (the process was killed while writing it).
    torn: Option<String>,
}

/// What one file holds: its processes' segments, and the failures it announces.
type Parsed = (Vec<Segment>, Vec<(Addr, Phase)>);

/// The segments and failure lines of one file's `text`.
fn parse(path: &Path, text: &str) -> Result<Parsed, String> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut failures = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line = match serde_json::from_str::<Line>(raw) {
            Ok(line) => line,
            Err(e) => {
                let Some(s) = segments.last_mut().filter(|s| s.torn.is_none()) else {
                    return Err(format!("{}: line {}: {e}", path.display(), i + 1));
                };
                s.torn = Some(format!("{}: line {}: {e}", path.display(), i + 1));
                continue;
            }
        };
        match line {
            Line::Start { .. } => segments.push(Segment::default()),
            other => {
                let Some(s) = segments.last_mut() else {
                    return Err(format!(
                        "{}: line {} comes before any start line",
                        path.display(),
                        i + 1
                    ));
                };
                if let Some(torn) = &s.torn {
                    return Err(format!("{torn}, and more lines follow it"));
                }
                match other {
                    Line::Phase { txns, .. } => s.txns.extend(txns),
                    Line::Failed { node, phase } => failures.push((node, phase)),
                    Line::Start { .. } => unreachable!("matched above"),
                }
            }
        }
    }
    Ok((segments, failures))
}

/// Reads the history files of a cluster's nodes, `paths[n]` node `n`'s (a missing file: a node
/// that recorded nothing), and merges them under the rule of the module doc.
pub fn read_cluster_history(paths: &[PathBuf]) -> Result<ClusterHistory, String> {
    let mut files = Vec::with_capacity(paths.len());
    let mut failures: Vec<(Addr, Phase)> = Vec::new();
    for path in paths {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let (segments, seen) = parse(path, &text)?;
        for f in seen {
            if !failures.contains(&f) {
                failures.push(f);
            }
        }
        files.push(segments);
    }
    failures.sort_unstable();
    let mut out = ClusterHistory {
        failures: failures.clone(),
        ..ClusterHistory::default()
    };
    let mut parts = Vec::with_capacity(files.len());
    for (node, segments) in files.into_iter().enumerate() {
        // The phases this node's failures interrupted, in order: the k-th is its k-th process's.
        let interrupted: Vec<Phase> = failures
            .iter()
            .filter(|f| f.0 as usize == node)
            .map(|f| f.1)
            .collect();
        let mut kept = Vec::new();
        for (k, segment) in segments.into_iter().enumerate() {
            let cut = interrupted.get(k).copied();
            if let (Some(torn), None) = (&segment.torn, cut) {
                return Err(format!(
                    "{torn}: a torn line in the history of node {node}, which was not declared failed"
                ));
            }
            for mut t in segment.txns {
                let in_time = cut.is_none_or(|phase| {
                    t.writes
                        .iter()
                        .map(|e| e.version)
                        .chain(t.reads.iter().map(|e| e.version))
                        .all(|v| phase_of(v) < phase)
                });
                if !in_time {
                    out.dropped += 1;
                    continue;
                }
                // Node in the top bits (as `node_history` does), the process below them, then
                // the order in the file (a worker numbers each part it hands over afresh).
                t.id = ((node as u64 + 1) << 52) | ((k as u64 & 0xf) << 48) | kept.len() as u64;
                kept.push(t);
            }
        }
        out.per_node.push(kept.len());
        parts.push(History { txns: kept });
    }
    out.history = History::merge(parts);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_check::{Item, WriteEvent, WriteKind};

    fn version(phase: u64, seq: u64) -> u64 {
        (phase << 32) | seq
    }

    fn txn(id: u64, key: u64, phase: u64, prev: u64) -> TxnEvent {
        TxnEvent {
            id,
            worker: 0,
            reads: Vec::new(),
            writes: vec![WriteEvent {
                item: Item::new(0, key),
                version: version(phase, id),
                prev,
                kind: WriteKind::Update,
            }],
            split_ops: Vec::new(),
            merges: Vec::new(),
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("phasedb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_failed_node_loses_the_interrupted_phase_and_its_torn_line_only() {
        let d = dir("history-log");
        let paths = vec![d.join("0.jsonl"), d.join("1.jsonl")];
        let mut live = HistoryWriter::open(&paths[0], 0, 7).unwrap();
        live.phase(
            3,
            History {
                txns: vec![txn(1, 1, 3, 0)],
            },
        )
        .unwrap();
        live.write(&Line::Failed { node: 1, phase: 5 }, false)
            .unwrap();
        let mut dead = HistoryWriter::open(&paths[1], 1, 8).unwrap();
        dead.phase(
            4,
            History {
                txns: vec![txn(2, 2, 4, 0)],
            },
        )
        .unwrap();
        dead.phase(
            5,
            History {
                txns: vec![txn(3, 2, 5, version(4, 2))],
            },
        )
        .unwrap();
        dead.file
            .write_all(b"{\"phase\":{\"phase\":6,\"tx")
            .unwrap();
        let read = read_cluster_history(&paths).unwrap();
        assert_eq!(read.failures, vec![(1, 5)]);
        assert_eq!(read.per_node, vec![1, 1]);
        assert_eq!(read.dropped, 1, "the write of phase 5 is taken back");
        assert!(
            read.history
                .txns
                .iter()
                .all(|t| phase_of(t.writes[0].version) < 5)
        );
        // A restarted process of the node starts a new segment, not cut by the old failure.
        let mut again = HistoryWriter::open(&paths[1], 1, 9).unwrap();
        again
            .phase(
                9,
                History {
                    txns: vec![txn(1, 3, 9, 0)],
                },
            )
            .unwrap();
        let read = read_cluster_history(&paths).unwrap();
        assert_eq!(read.per_node, vec![1, 2]);
        let ids: std::collections::BTreeSet<u64> = read.history.txns.iter().map(|t| t.id).collect();
        assert_eq!(ids.len(), 3, "ids stay unique across nodes and processes");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_torn_line_of_a_node_not_declared_failed_is_an_error() {
        let d = dir("history-log-torn");
        let paths = vec![d.join("0.jsonl")];
        let mut w = HistoryWriter::open(&paths[0], 0, 1).unwrap();
        w.phase(
            1,
            History {
                txns: vec![txn(1, 1, 1, 0)],
            },
        )
        .unwrap();
        w.file.write_all(b"{\"phase\":").unwrap();
        let e = read_cluster_history(&paths).unwrap_err();
        assert!(e.contains("not declared failed"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
