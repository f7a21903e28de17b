//! A history with everything Elle's formats cannot say spelled out as plain reads and writes:
//! Doppel's split-phase operations and merges, and rows loaded before the history started.
//!
//! Elle's rw-register and list-append histories know only transactions that read and write (or
//! append to) keys. [`flatten`] rewrites a history into that shape without losing a dependency
//! [`crate::check_serializable`] derives:
//!
//! - **Loaded rows.** One loader transaction (worker [`LOAD_WORKER`]) installs [`LOADED`] over
//!   [`ABSENT`] on every item some transaction saw loaded. A transaction that missed a loaded row
//!   then read the state before the loader, which an external checker can place.
//! - **Split phases.** The checker places each split-phase operation between the version `V` its
//!   merge replaced and the merge, through a virtual node. Here that node becomes a *phase start*
//!   transaction (worker [`PHASE_WORKER`]) that installs a synthetic version `S` over `V`
//!   ([`phase_start_version`]); every operation of the phase reads `S`, and the merge reads `S` and
//!   replaces it instead of `V`. The edges come out the same: the writer and readers of `V` precede
//!   the start (ww, rw), the start precedes each operation (wr), each operation precedes the merge
//!   (rw), and the operations, which commute, stay unordered among themselves. An operation whose
//!   merge is missing reads a version nobody wrote, which every checker reports.

use crate::history::{
    ABSENT, History, Item, LOAD_WORKER, LOADED, PHASE_WORKER, ReadEvent, SYNTHETIC_VERSIONS,
    TxnEvent, Version, WriteEvent, WriteKind,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// The synthetic version a phase start installs on an item for split phase `phase`.
pub fn phase_start_version(phase: u64) -> Version {
    SYNTHETIC_VERSIONS | (phase & (SYNTHETIC_VERSIONS - 1))
}

/// `h` with its split phases and loaded rows as plain transactions (see the module docs). The
/// result has no `split_ops` or `merges`, and is serializable exactly when `h` is: the checker
/// derives the same dependencies from both, between the transactions of `h` and through the added
/// ones. Added transactions take ids above every id of `h`.
pub fn flatten(h: &History) -> History {
    let mut next_id = h.txns.iter().map(|t| t.id).max().map_or(0, |m| m + 1);
    let mut out = History {
        txns: Vec::with_capacity(h.txns.len() + 1),
    };
    if let Some(loader) = loader(h, &mut next_id) {
        out.push(loader);
    }
    let mut starts = Vec::new();
    for t in &h.txns {
        let mut txn = TxnEvent {
            split_ops: Vec::new(),
            merges: Vec::new(),
            ..t.clone()
        };
        for m in &t.merges {
            let Some(w) = txn.writes.iter_mut().find(|w| w.item == m.item) else {
                // A merge without its write: the checker reports it; nothing to place here.
                continue;
            };
            let start = phase_start_version(m.phase);
            let before = w.prev;
            w.prev = start;
            for r in txn.reads.iter_mut().filter(|r| r.item == m.item) {
                if r.version == before {
                    r.version = start;
                }
            }
            starts.push(TxnEvent {
                id: next_id,
                worker: PHASE_WORKER,
                reads: Vec::new(),
                writes: vec![WriteEvent {
                    item: m.item,
                    version: start,
                    prev: before,
                    kind: WriteKind::Update,
                }],
                split_ops: Vec::new(),
                merges: Vec::new(),
            });
            next_id += 1;
        }
        let phased: BTreeSet<(Item, u64)> = t.split_ops.iter().map(|o| (o.item, o.phase)).collect();
        txn.reads
            .extend(phased.into_iter().map(|(item, phase)| ReadEvent {
                item,
                version: phase_start_version(phase),
            }));
        out.push(txn);
    }
    out.txns.extend(starts);
    out
}

/// The transaction that installs [`LOADED`] on every item some transaction of `h` saw loaded,
/// unless `h` holds one already (or nothing was loaded).
fn loader(h: &History, next_id: &mut u64) -> Option<TxnEvent> {
    let mut loaded: FxHashMap<Item, bool> = FxHashMap::default();
    for t in &h.txns {
        for r in t.reads.iter().filter(|r| r.version == LOADED) {
            loaded.entry(r.item).or_insert(false);
        }
        for w in &t.writes {
            if w.prev == LOADED {
                loaded.entry(w.item).or_insert(false);
            }
            if w.version == LOADED {
                loaded.insert(w.item, true);
            }
        }
    }
    let mut items: Vec<Item> = loaded
        .into_iter()
        .filter(|&(_, installed)| !installed)
        .map(|(item, _)| item)
        .collect();
    if items.is_empty() {
        return None;
    }
    items.sort_unstable();
    let id = *next_id;
    *next_id += 1;
    Some(TxnEvent {
        id,
        worker: LOAD_WORKER,
        reads: Vec::new(),
        writes: items
            .into_iter()
            .map(|item| WriteEvent {
                item,
                version: LOADED,
                prev: ABSENT,
                kind: WriteKind::Insert,
            })
            .collect(),
        split_ops: Vec::new(),
        merges: Vec::new(),
    })
}
