//! Export to Jepsen Elle's EDN history formats, so the same history can be
//! checked by Elle (or adya, which reads the same files).
//!
//! Each committed transaction becomes an `:invoke` op followed by an `:ok`
//! op on the process of its worker. Transactions are ordered by
//! `(worker, id)`, which makes every process sequential but invents a
//! real-time order between workers: check these files against
//! `serializable`, not `strict-serializable`.
//!
//! Both exports first [`flatten`] the history, so Doppel's split-phase
//! operations and merges, and rows loaded before the history, appear as
//! plain reads and writes with the same dependencies.
//!
//! Reads come before writes inside each transaction, matching the recording
//! rule that reads only see the store, never the transaction's own writes.

use crate::flatten::flatten;
use crate::history::{
    ABSENT, History, Item, LOAD_WORKER, LOADED, OBSERVER_WORKER, ReadEvent, TxnEvent, Version,
};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// Largest table id that gets a compact register key.
const COMPACT_TABLE_LIMIT: u32 = 1 << 15;
/// Largest primary key (exclusive) that gets a compact register key.
const COMPACT_KEY_LIMIT: u64 = 1 << 48;

/// The Elle register (or list) key of an item, unique per item.
///
/// Compact form `table << 48 | key` (below 2^63, a plain EDN long) when
/// `table < 2^15` and `key < 2^48`; otherwise `2^63 + (table << 64 | key)`,
/// which never collides with a compact key and is written as an EDN bigint
/// (`...N`). adya reads only 64-bit integers, so it needs compact keys.
pub fn elle_key(item: Item) -> u128 {
    if item.table < COMPACT_TABLE_LIMIT && item.key < COMPACT_KEY_LIMIT {
        (u128::from(item.table) << 48) | u128::from(item.key)
    } else {
        (1u128 << 63) + ((u128::from(item.table) << 64) | u128::from(item.key))
    }
}

/// The history as an Elle rw-register history: `[:r k v]` for each read
/// (`nil` for [`ABSENT`]) and `[:w k v]` for each write, deletes included,
/// with the version id as the value. One EDN map per line.
pub fn to_elle_edn(h: &History) -> String {
    write_ops(&flatten(h), |txn, completed, out| {
        for r in &txn.reads {
            out.push_str(" [:r ");
            push_int(out, elle_key(r.item));
            out.push(' ');
            if completed && r.version != ABSENT {
                push_int(out, u128::from(r.version));
            } else {
                out.push_str("nil");
            }
            out.push(']');
        }
        for w in &txn.writes {
            out.push_str(" [:w ");
            push_int(out, elle_key(w.item));
            out.push(' ');
            push_int(out, u128::from(w.version));
            out.push(']');
        }
    })
}

/// `h` plus a last read-only transaction (worker [`OBSERVER_WORKER`], which no
/// other transaction uses) that reads the newest version of every item: the
/// highest version of an item that no write replaced, or else its initial
/// version ([`LOADED`] if a transaction saw it loaded, [`ABSENT`] otherwise).
/// The list-append export shows an item's whole version order only to a read
/// of its head, so checkers that take that export (Elle, the adya crate) need
/// this observer; it writes nothing, so it gains only incoming edges and
/// cannot create or break a cycle.
pub fn with_observer(h: &History) -> History {
    let replaced: HashSet<_> = h
        .txns
        .iter()
        .flat_map(|t| &t.writes)
        .map(|w| (w.item, w.prev))
        .collect();
    let mut heads: BTreeMap<Item, Version> = BTreeMap::new();
    let mut written: BTreeMap<Item, Version> = BTreeMap::new();
    let mut initial = |item, version| {
        let head = heads.entry(item).or_insert(ABSENT);
        if version == LOADED {
            *head = LOADED;
        }
    };
    for t in &h.txns {
        for r in &t.reads {
            initial(r.item, r.version);
        }
        for w in &t.writes {
            initial(w.item, w.prev);
            if !replaced.contains(&(w.item, w.version)) {
                let head = written.entry(w.item).or_insert(w.version);
                *head = (*head).max(w.version);
            }
        }
    }
    heads.extend(written);
    let mut out = h.clone();
    out.push(TxnEvent {
        id: h.txns.iter().map(|t| t.id).max().map_or(0, |m| m + 1),
        worker: OBSERVER_WORKER,
        split_ops: Vec::new(),
        merges: Vec::new(),
        reads: heads
            .into_iter()
            .map(|(item, version)| ReadEvent { item, version })
            .collect(),
        writes: Vec::new(),
    });
    out
}

/// The history as an Elle list-append history: each write appends its
/// version id to the item's list, and each read returns the list of
/// versions from the first one up to the version read (following `prev`
/// links). The reads are made from the engine's version chains, not from the
/// data the transactions saw; a workload that records what it read exports
/// that instead (`crate::list_append`). Output grows with chain length times
/// reads, so keep it for small or medium histories.
pub fn to_elle_list_append_edn(h: &History) -> String {
    to_elle_list_append_edn_within(h, u64::MAX).expect("no limit")
}

/// As [`to_elle_list_append_edn`], or `None` as soon as its reads would list more than `limit`
/// versions in all (long version chains read often make the export grow with their square).
pub fn to_elle_list_append_edn_within(h: &History, limit: u64) -> Option<String> {
    let h = &flatten(h);
    let prev_of: FxHashMap<(Item, Version), Version> = h
        .txns
        .iter()
        .flat_map(|t| &t.writes)
        .map(|w| ((w.item, w.version), w.prev))
        .collect();
    let mut chain = Vec::new();
    let mut listed = 0u64;
    let text = write_ops(h, |txn, completed, out| {
        if listed > limit {
            return;
        }
        for r in &txn.reads {
            out.push_str(" [:r ");
            push_int(out, elle_key(r.item));
            if !completed {
                out.push_str(" nil]");
                continue;
            }
            prefix(&prev_of, r.item, r.version, &mut chain);
            listed += chain.len() as u64;
            out.push_str(" [");
            for (i, v) in chain.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                push_int(out, u128::from(*v));
            }
            out.push_str("]]");
        }
        for w in &txn.writes {
            out.push_str(" [:append ");
            push_int(out, elle_key(w.item));
            out.push(' ');
            push_int(out, u128::from(w.version));
            out.push(']');
        }
    });
    (listed <= limit).then_some(text)
}

/// The versions of `item` from the oldest up to `version`, into `chain`.
/// Stops at [`ABSENT`], at a version nobody wrote, or after as many steps as
/// there are writes (a cyclic chain in a corrupt history).
fn prefix(
    prev_of: &FxHashMap<(Item, Version), Version>,
    item: Item,
    version: Version,
    chain: &mut Vec<Version>,
) {
    chain.clear();
    let mut v = version;
    while v != ABSENT && chain.len() <= prev_of.len() {
        chain.push(v);
        match prev_of.get(&(item, v)) {
            Some(&p) => v = p,
            None => break,
        }
    }
    chain.reverse();
}

/// Writes the invoke/ok pair of every transaction, sorted by
/// `(worker, id)`; `mops` appends one transaction's micro-ops, with final
/// read values only when `completed`.
fn write_ops(h: &History, mut mops: impl FnMut(&TxnEvent, bool, &mut String)) -> String {
    let mut order: Vec<&TxnEvent> = h.txns.iter().collect();
    // The loader first, as it ran before everything else.
    order.sort_by_key(|t| (t.worker != LOAD_WORKER, t.worker, t.id));
    let mut out = String::new();
    let mut index = 0u64;
    for txn in order {
        for (kind, completed) in [(":invoke", false), (":ok", true)] {
            out.push_str("{:type ");
            out.push_str(kind);
            out.push_str(", :f :txn, :value [");
            let start = out.len();
            mops(txn, completed, &mut out);
            if out[start..].starts_with(' ') {
                out.remove(start);
            }
            let _ = writeln!(
                out,
                "], :process {}, :index {}, :txn-id {}}}",
                txn.worker, index, txn.id
            );
            index += 1;
        }
    }
    out
}

/// Writes an integer, as an EDN bigint when it does not fit a signed long.
fn push_int(out: &mut String, n: u128) {
    let _ = write!(out, "{n}");
    if n > i64::MAX as u128 {
        out.push('N');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{ReadEvent, WriteEvent, WriteKind};

    fn sample() -> History {
        let x = Item::new(1, 7);
        History {
            txns: vec![
                TxnEvent {
                    id: 2,
                    worker: 0,
                    split_ops: Vec::new(),
                    merges: Vec::new(),
                    reads: vec![ReadEvent {
                        item: x,
                        version: 5,
                    }],
                    writes: vec![WriteEvent {
                        item: x,
                        version: 9,
                        prev: 5,
                        kind: WriteKind::Delete,
                    }],
                },
                TxnEvent {
                    id: 1,
                    worker: 0,
                    split_ops: Vec::new(),
                    merges: Vec::new(),
                    reads: vec![ReadEvent {
                        item: x,
                        version: 0,
                    }],
                    writes: vec![WriteEvent {
                        item: x,
                        version: 5,
                        prev: 0,
                        kind: WriteKind::Insert,
                    }],
                },
            ],
        }
    }

    #[test]
    fn keys_are_compact_or_disjoint() {
        assert_eq!(elle_key(Item::new(1, 7)), (1 << 48) | 7);
        let big = elle_key(Item::new(0, u64::MAX));
        assert!(big > i64::MAX as u128);
        assert_ne!(big, elle_key(Item::new(1, u64::MAX)));
    }

    #[test]
    fn register_form() {
        let k = (1u64 << 48) | 7;
        let text = to_elle_edn(&sample());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            format!(
                "{{:type :invoke, :f :txn, :value [[:r {k} nil] [:w {k} 5]], :process 0, :index 0, :txn-id 1}}"
            )
        );
        assert_eq!(
            lines[3],
            format!(
                "{{:type :ok, :f :txn, :value [[:r {k} 5] [:w {k} 9]], :process 0, :index 3, :txn-id 2}}"
            )
        );
    }

    #[test]
    fn list_append_export_stops_past_its_limit() {
        let h = sample();
        // The ok reads list versions [] and [5]: one in all.
        assert!(to_elle_list_append_edn_within(&h, 0).is_none());
        assert_eq!(
            to_elle_list_append_edn_within(&h, 1),
            Some(to_elle_list_append_edn(&h))
        );
    }

    #[test]
    fn list_append_form() {
        let k = (1u64 << 48) | 7;
        let text = to_elle_list_append_edn(&sample());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains(&format!("[[:r {k} []] [:append {k} 5]]")));
        assert!(lines[3].contains(&format!("[[:r {k} [5]] [:append {k} 9]]")));
    }
}
