//! Conflict-serializability of a committed history: Adya's direct
//! serialization graph must be acyclic and every version chain well formed.

use crate::anomaly::{Anomaly, Cycle, CycleEdge, EdgeKind};
use crate::graph::Graph;
use crate::history::History;
use crate::index::{NONE, VersionIndex};

/// Edge visits spent looking for a shorter cycle after the first one.
const SHORT_CYCLE_BUDGET: usize = 4_000_000;

/// Counts describing a history that passed the check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Committed transactions.
    pub transactions: usize,
    /// Read events.
    pub reads: usize,
    /// Write events.
    pub writes: usize,
    /// Write dependencies (one per replaced version written in the history).
    pub ww_edges: usize,
    /// Read dependencies (one per read of another transaction's version).
    pub wr_edges: usize,
    /// Anti-dependencies (one per read of a version another transaction replaced).
    pub rw_edges: usize,
    /// Distinct transaction pairs joined by at least one edge.
    pub distinct_edges: usize,
}

/// Checks that a history of committed transactions is conflict-serializable.
///
/// Builds Adya's direct serialization graph (ww, wr and rw edges from the
/// exact per-item version order given by each write's `prev`) and searches
/// it for a cycle without recursion, so million-transaction histories are
/// fine. Malformed version chains (duplicate ids, forks) and reads of
/// versions nobody wrote are reported before any cycle.
///
/// # Panics
/// If the history holds `u32::MAX` transactions or more.
pub fn check_serializable(h: &History) -> Result<CheckStats, Anomaly> {
    assert!(h.len() < NONE as usize, "too many transactions to check");
    let index = VersionIndex::build(h)?;
    let mut stats = CheckStats {
        transactions: h.len(),
        ..CheckStats::default()
    };
    let edges = collect_edges(h, &index, &mut stats)?;
    let graph = Graph::from_edges(h.len(), &edges);
    drop(edges);
    stats.distinct_edges = graph.edge_count();
    let sccs = graph.nontrivial_sccs();
    let Some(smallest) = sccs.iter().min_by_key(|c| c.len()) else {
        return Ok(stats);
    };
    let cycle = graph.short_cycle(smallest, SHORT_CYCLE_BUDGET);
    Err(Anomaly::Cycle(label_cycle(h, &index, &cycle)))
}

/// All dependency edges between distinct transactions, as position pairs;
/// fails on a read of a version nobody wrote.
fn collect_edges(
    h: &History,
    index: &VersionIndex,
    stats: &mut CheckStats,
) -> Result<Vec<(u32, u32)>, Anomaly> {
    let mut edges = Vec::new();
    for (pos, txn) in h.txns.iter().enumerate() {
        let pos = pos as u32;
        stats.writes += txn.writes.len();
        stats.reads += txn.reads.len();
        for r in &txn.reads {
            let slot = index.get(r.item, r.version);
            let writer = slot.map_or(NONE, |s| s.writer);
            if r.version != 0 && writer == NONE {
                return Err(Anomaly::ReadOfUnwrittenVersion {
                    txn: txn.id,
                    item: r.item,
                    version: r.version,
                });
            }
            if writer != NONE && writer != pos {
                edges.push((writer, pos));
                stats.wr_edges += 1;
            }
            let next = slot.map_or(NONE, |s| s.next_writer);
            if next != NONE && next != pos {
                edges.push((pos, next));
                stats.rw_edges += 1;
            }
        }
    }
    for (_, slot) in index.slots() {
        if slot.writer != NONE && slot.next_writer != NONE && slot.writer != slot.next_writer {
            edges.push((slot.writer, slot.next_writer));
            stats.ww_edges += 1;
        }
    }
    Ok(edges)
}

/// Names each hop of a cycle of positions with one dependency behind it.
fn label_cycle(h: &History, index: &VersionIndex, cycle: &[u32]) -> Cycle {
    let edges = cycle
        .iter()
        .zip(cycle.iter().cycle().skip(1))
        .map(|(&a, &b)| label_edge(h, index, a, b))
        .collect();
    Cycle { edges }
}

/// The first dependency from `a` to `b`, looking at ww, then wr, then rw.
fn label_edge(h: &History, index: &VersionIndex, a: u32, b: u32) -> CycleEdge {
    let (ta, tb) = (&h.txns[a as usize], &h.txns[b as usize]);
    let edge = |kind, item, version| CycleEdge {
        from: ta.id,
        to: tb.id,
        kind,
        item,
        version,
    };
    let ww = tb
        .writes
        .iter()
        .find(|w| w.prev != 0 && index.writer(w.item, w.prev) == a)
        .map(|w| edge(EdgeKind::Ww, w.item, w.prev));
    let wr = || {
        tb.reads
            .iter()
            .find(|r| r.version != 0 && index.writer(r.item, r.version) == a)
            .map(|r| edge(EdgeKind::Wr, r.item, r.version))
    };
    let rw = || {
        ta.reads
            .iter()
            .find(|r| index.next_writer(r.item, r.version) == b)
            .map(|r| edge(EdgeKind::Rw, r.item, r.version))
    };
    ww.or_else(wr)
        .or_else(rw)
        .expect("every graph edge comes from a ww, wr or rw dependency")
}
