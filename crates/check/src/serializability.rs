//! Conflict-serializability of a committed history: Adya's direct
//! serialization graph must be acyclic and every version chain well formed.

use crate::anomaly::{Anomaly, Cycle, CycleEdge, EdgeKind};
use crate::graph::Graph;
use crate::history::{ABSENT, History, Item, LOADED, Version};
use crate::index::{NONE, VersionIndex};
use rustc_hash::FxHashMap;

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
/// fine. Malformed version chains (duplicate ids, forks), reads of
/// versions nobody wrote and loaded rows seen absent are reported before any
/// cycle.
///
/// # Panics
/// If the history holds `u32::MAX` transactions or more.
pub fn check_serializable(h: &History) -> Result<CheckStats, Anomaly> {
    assert!(h.len() < NONE as usize, "too many transactions to check");
    let index = VersionIndex::build(h)?;
    check_initial_versions(h)?;
    let mut stats = CheckStats {
        transactions: h.len(),
        ..CheckStats::default()
    };
    let mut edges = collect_edges(h, &index, &mut stats)?;
    let merges = split_edges(h, &index, &mut edges)?;
    let graph = Graph::from_edges(h.len() + merges.len(), &edges);
    drop(edges);
    stats.distinct_edges = graph.edge_count();
    let sccs = graph.nontrivial_sccs();
    let Some(smallest) = sccs.iter().min_by_key(|c| c.len()) else {
        return Ok(stats);
    };
    let cycle = graph.short_cycle(smallest, SHORT_CYCLE_BUDGET);
    Err(Anomaly::Cycle(label_cycle(h, &index, &merges, &cycle)))
}

/// Fails when one transaction saw an item start absent (it read or replaced [`ABSENT`]) and another
/// saw it start loaded (it read or replaced [`LOADED`]): a loaded row is never absent, and a key
/// that did not exist was never loaded.
fn check_initial_versions(h: &History) -> Result<(), Anomaly> {
    // Per item: the first transaction that saw it absent, and the first that saw it loaded.
    let mut seen: FxHashMap<Item, [Option<u64>; 2]> = FxHashMap::default();
    for txn in &h.txns {
        let versions = txn.reads.iter().map(|r| (r.item, r.version));
        // A loader's write of LOADED replaces ABSENT, and is no miss but a witness of the load.
        let prevs = txn.writes.iter().map(|w| {
            let seen = if w.version == LOADED {
                w.version
            } else {
                w.prev
            };
            (w.item, seen)
        });
        for (item, version) in versions.chain(prevs) {
            let side = match version {
                ABSENT => 0,
                LOADED => 1,
                _ => continue,
            };
            let entry = seen.entry(item).or_default();
            entry[side].get_or_insert(txn.id);
            if let [Some(absent), Some(loaded)] = *entry {
                return Err(Anomaly::LoadedRowMissed {
                    txn: absent,
                    item,
                    witness: loaded,
                });
            }
        }
    }
    Ok(())
}

/// A merge of one item's slices after one split phase, with the graph node that stands for the
/// start of that phase on the item.
struct Merge {
    item: Item,
    /// The version the merge replaced: every operation of the phase applies after it.
    prev: Version,
    /// Position of the merge transaction.
    merge: u32,
}

/// Edges of commutative operations applied to per-core slices (Doppel's split phases). The
/// operations commute, so none orders against another; each sits between the version its merge
/// replaced and the merge itself. A virtual node per merge (position `h.len() + i`) stands for that
/// point: the writer and readers of the replaced version precede it, it precedes every operation of
/// the phase, and every operation precedes the merge.
fn split_edges(
    h: &History,
    index: &VersionIndex,
    edges: &mut Vec<(u32, u32)>,
) -> Result<Vec<Merge>, Anomaly> {
    let mut merges = Vec::new();
    let mut by_phase: FxHashMap<(Item, u64), u32> = FxHashMap::default();
    let mut by_prev: FxHashMap<(Item, Version), u32> = FxHashMap::default();
    for (pos, txn) in h.txns.iter().enumerate() {
        for m in &txn.merges {
            let Some(w) = txn.writes.iter().find(|w| w.item == m.item) else {
                return Err(Anomaly::MergeWithoutWrite {
                    txn: txn.id,
                    item: m.item,
                });
            };
            let node = (h.len() + merges.len()) as u32;
            by_phase.insert((m.item, m.phase), merges.len() as u32);
            by_prev.insert((m.item, w.prev), node);
            let writer = index.writer(m.item, w.prev);
            if writer != NONE {
                edges.push((writer, node));
            }
            merges.push(Merge {
                item: m.item,
                prev: w.prev,
                merge: pos as u32,
            });
        }
    }
    if merges.is_empty() {
        return Ok(merges);
    }
    for (pos, txn) in h.txns.iter().enumerate() {
        for r in &txn.reads {
            if let Some(&node) = by_prev.get(&(r.item, r.version))
                && merges[node as usize - h.len()].merge != pos as u32
            {
                edges.push((pos as u32, node));
            }
        }
        for op in &txn.split_ops {
            let Some(&i) = by_phase.get(&(op.item, op.phase)) else {
                return Err(Anomaly::UnmergedSplitOp {
                    txn: txn.id,
                    item: op.item,
                    phase: op.phase,
                });
            };
            edges.push(((h.len() + i as usize) as u32, pos as u32));
            edges.push((pos as u32, merges[i as usize].merge));
        }
    }
    Ok(merges)
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
            if r.version != ABSENT && r.version != LOADED && writer == NONE {
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

/// Names each hop of a cycle of positions with one dependency behind it; a hop through a split
/// phase's virtual node becomes one `split` edge.
fn label_cycle(h: &History, index: &VersionIndex, merges: &[Merge], cycle: &[u32]) -> Cycle {
    let n = h.len() as u32;
    let Some(start) = cycle.iter().position(|&p| p < n) else {
        return Cycle { edges: Vec::new() };
    };
    let mut edges = Vec::new();
    let len = cycle.len();
    let mut i = 0;
    while i < len {
        let a = cycle[(start + i) % len];
        let mut j = i + 1;
        let mut via = None;
        while cycle[(start + j) % len] >= n {
            via = Some(&merges[(cycle[(start + j) % len] - n) as usize]);
            j += 1;
        }
        let b = cycle[(start + j) % len];
        edges.push(match via {
            Some(m) => CycleEdge {
                from: h.txns[a as usize].id,
                to: h.txns[b as usize].id,
                kind: EdgeKind::Split,
                item: m.item,
                version: m.prev,
            },
            None => label_edge(h, index, merges, a, b),
        });
        i = j;
    }
    Cycle { edges }
}

/// The first dependency from `a` to `b`, looking at ww, then wr, then rw, then an operation `a`
/// applied to a slice that `b` merged.
fn label_edge(h: &History, index: &VersionIndex, merges: &[Merge], a: u32, b: u32) -> CycleEdge {
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
    let split = || {
        merges
            .iter()
            .find(|m| m.merge == b && ta.split_ops.iter().any(|op| op.item == m.item))
            .map(|m| edge(EdgeKind::Split, m.item, m.prev))
    };
    ww.or_else(wr)
        .or_else(rw)
        .or_else(split)
        .expect("every graph edge comes from a ww, wr, rw or split dependency")
}
