//! Value-observed list-append histories, as Jepsen's Elle checks them: transactions append unique
//! integers to per-key lists and read whole lists back, and the history records what each read
//! *returned*, not what the engine says it installed. Every read then shows the order of every
//! append before it, so the version order of a key is its longest read, and each dependency
//! follows from the data alone.
//!
//! [`ListAppendHistory::check`] infers the version orders, rejects what no order explains (a read
//! that is not a prefix of the others, an element nobody appended or a failed transaction
//! appended, a read of a transaction's intermediate state, a transaction that saw two states of a
//! key), then builds the plain [`History`] those orders imply and hands it to
//! [`check_serializable`]. [`ListAppendHistory::to_elle_edn`] writes the same history for Elle.
//!
//! Keys hold the lists in `loaded` when the history starts, the empty list otherwise: a read of a
//! loaded key that returns the empty list is a miss of a loaded row
//! ([`Anomaly::LoadedRowMissed`]).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::history::{
    ABSENT, History, Item, LOAD_WORKER, LOADED, OBSERVER_WORKER, ReadEvent, SYNTHETIC_VERSIONS,
    TxnEvent, Version, WriteEvent, WriteKind,
};
use crate::{Anomaly, CheckStats, check_serializable};

/// Largest element (exclusive): elements stand for versions, and higher ids are reserved (an
/// unobserved append's made-up predecessor `ELEMENT_LIMIT | element` stays below them).
pub const ELEMENT_LIMIT: u64 = 1 << 60;
const _: () = assert!(ELEMENT_LIMIT * 2 <= SYNTHETIC_VERSIONS);

/// How a transaction ended, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Committed; its reads carry what they returned.
    Ok,
    /// Aborted: nothing it did may be seen.
    Fail,
    /// Unknown whether it committed (its reads returned nothing the client kept).
    Info,
}

/// One micro-operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "lowercase")]
pub enum Mop {
    /// Appended `value` (unique per key, non-zero, below [`ELEMENT_LIMIT`]) to `key`'s list.
    Append {
        /// The key.
        key: u64,
        /// The element appended.
        value: u64,
    },
    /// Read `key`'s list; `list` is what it returned (`None` when the transaction did not
    /// complete).
    #[serde(rename = "r")]
    Read {
        /// The key.
        key: u64,
        /// The list returned, oldest element first.
        list: Option<Vec<u64>>,
    },
    /// Added `delta` to counter `counter` (counters are named apart from list keys), a commutative
    /// operation (a split-phase operation under Doppel). Elle's list-append model has no counters:
    /// the EDN export leaves these out, and the checks here ignore them.
    Add {
        /// The counter.
        counter: u64,
        /// The amount added.
        delta: i64,
    },
    /// Read counter `counter`: `value` is what it returned (`None` when the transaction did not
    /// complete). Left out of the EDN export and ignored by the checks, like [`Mop::Add`].
    Count {
        /// The counter.
        counter: u64,
        /// The value returned.
        value: Option<i64>,
    },
}

/// One transaction as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    /// The client process (thread) that ran it; each process runs one transaction at a time.
    pub process: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// Its micro-operations in the order it ran them.
    pub mops: Vec<Mop>,
}

/// A value-observed list-append history: the loaded lists and every transaction, each process's
/// in the order it ran them. Committed transactions of process [`OBSERVER_WORKER`] are final reads,
/// run after every other transaction: each committed append to a key they read must be in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAppendHistory {
    /// Keys that held a list before the history started, with the list (distinct elements).
    pub loaded: Vec<(u64, Vec<u64>)>,
    /// The transactions.
    pub txns: Vec<Txn>,
}

/// Why a value-observed list-append history is not serializable (or not well formed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// An element was appended to one key twice (or loaded and appended), so reads are ambiguous.
    DuplicateAppend {
        /// The key.
        key: u64,
        /// The element.
        value: u64,
    },
    /// An element is 0 or at least [`ELEMENT_LIMIT`].
    ReservedElement {
        /// The key.
        key: u64,
        /// The element.
        value: u64,
    },
    /// A committed transaction's read has no value.
    MissingReadValue {
        /// The transaction (its position in the history).
        txn: usize,
        /// The key.
        key: u64,
    },
    /// A read returned a list holding one element twice.
    DuplicateElement {
        /// The reader.
        txn: usize,
        /// The key.
        key: u64,
        /// The repeated element.
        value: u64,
    },
    /// Two reads of a key returned lists neither of which is a prefix of the other: no single
    /// order of appends explains both.
    IncompatibleOrder {
        /// The key.
        key: u64,
        /// The two readers (`usize::MAX` stands for the loaded list).
        txns: (usize, usize),
    },
    /// A read returned an element that no transaction appended (and nothing loaded).
    UnknownElement {
        /// The reader.
        txn: usize,
        /// The key.
        key: u64,
        /// The element.
        value: u64,
    },
    /// A read returned an element a failed transaction appended (G1a, aborted read).
    AbortedRead {
        /// The reader.
        txn: usize,
        /// The key.
        key: u64,
        /// The element.
        value: u64,
        /// The failed transaction that appended it.
        writer: usize,
    },
    /// A read ended at an element its writer followed with another append to the same key: it saw
    /// a state that writer never committed (G1b, intermediate read).
    IntermediateRead {
        /// The reader.
        txn: usize,
        /// The key.
        key: u64,
        /// The element the read ended at.
        value: u64,
        /// The transaction that appended it and more.
        writer: usize,
    },
    /// A committed append is missing from the final read of its key (a lost write).
    LostAppend {
        /// The transaction that appended it.
        txn: usize,
        /// The key.
        key: u64,
        /// The element.
        value: u64,
    },
    /// A transaction's reads of one key disagree with each other or with its own appends.
    Internal {
        /// The transaction.
        txn: usize,
        /// The key.
        key: u64,
    },
    /// The dependency graph the version orders imply has a problem (a cycle, a miss of a loaded
    /// row); transaction ids in it are positions in the history.
    Anomaly(Anomaly),
}

impl fmt::Display for Violation {
    /// A one-line explanation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::DuplicateAppend { key, value } => {
                write!(
                    f,
                    "element {value} was appended to key {key} more than once"
                )
            }
            Violation::ReservedElement { key, value } => write!(
                f,
                "element {value} of key {key} is 0 or at least {ELEMENT_LIMIT}"
            ),
            Violation::MissingReadValue { txn, key } => {
                write!(
                    f,
                    "committed T{txn} has a read of key {key} without a value"
                )
            }
            Violation::DuplicateElement { txn, key, value } => {
                write!(f, "T{txn} read key {key} holding element {value} twice")
            }
            Violation::IncompatibleOrder { key, txns: (a, b) } => write!(
                f,
                "reads of key {key} by {} and {} disagree on the order of appends",
                name(*a),
                name(*b)
            ),
            Violation::UnknownElement { txn, key, value } => write!(
                f,
                "T{txn} read element {value} of key {key}, which nobody appended"
            ),
            Violation::AbortedRead {
                txn,
                key,
                value,
                writer,
            } => write!(
                f,
                "T{txn} read element {value} of key {key}, appended by T{writer}, which failed (G1a)"
            ),
            Violation::IntermediateRead {
                txn,
                key,
                value,
                writer,
            } => write!(
                f,
                "T{txn} read key {key} ending at {value}, which T{writer} followed with another \
                 append (G1b)"
            ),
            Violation::LostAppend { txn, key, value } => write!(
                f,
                "element {value} that T{txn} appended to key {key} is missing from the final read"
            ),
            Violation::Internal { txn, key } => write!(
                f,
                "T{txn}'s reads of key {key} disagree with each other or with its own appends"
            ),
            Violation::Anomaly(a) => write!(f, "{a}"),
        }
    }
}

impl std::error::Error for Violation {}

/// `T<n>`, or "the loaded list".
fn name(txn: usize) -> String {
    if txn == usize::MAX {
        "the loaded list".into()
    } else {
        format!("T{txn}")
    }
}

/// Where an element came from.
#[derive(Clone, Copy)]
enum Source {
    Loaded,
    /// Transaction position and whether it appended to the key again after this element.
    Txn(usize, bool),
}

impl ListAppendHistory {
    /// Checks that the history is serializable, from the values it records alone.
    pub fn check(&self) -> Result<CheckStats, Violation> {
        let sources = self.sources()?;
        let orders = self.orders()?;
        self.check_reads(&sources)?;
        self.check_final_reads(&orders)?;
        check_serializable(&self.plain(&orders)).map_err(Violation::Anomaly)
    }

    /// Who appended each element (or loaded it); fails on duplicates and reserved elements.
    fn sources(&self) -> Result<FxHashMap<(u64, u64), Source>, Violation> {
        let mut sources = FxHashMap::default();
        let mut add = |key, value, source| {
            if value == 0 || value >= ELEMENT_LIMIT {
                return Err(Violation::ReservedElement { key, value });
            }
            match sources.insert((key, value), source) {
                Some(_) => Err(Violation::DuplicateAppend { key, value }),
                None => Ok(()),
            }
        };
        for (key, list) in &self.loaded {
            for &v in list {
                add(*key, v, Source::Loaded)?;
            }
        }
        for (i, t) in self.txns.iter().enumerate() {
            let appends: Vec<(u64, u64)> = appends(t).collect();
            for (j, &(key, value)) in appends.iter().enumerate() {
                let again = appends[j + 1..].iter().any(|&(k, _)| k == key);
                add(key, value, Source::Txn(i, again))?;
            }
        }
        Ok(sources)
    }

    /// Each key's version order: its longest read (or loaded list), of which every other read
    /// of the key must be a prefix.
    fn orders(&self) -> Result<FxHashMap<u64, Vec<u64>>, Violation> {
        // Per key: the longest list so far and who read it.
        let mut longest: FxHashMap<u64, (&[u64], usize)> = FxHashMap::default();
        let loaded = self
            .loaded
            .iter()
            .map(|(k, l)| (*k, l.as_slice(), usize::MAX));
        let read = self.ok_reads().map(|(i, key, list)| (key, list, i));
        for (key, list, reader) in loaded.chain(read) {
            let (best, by) = longest.entry(key).or_insert((list, reader));
            let (short, long) = if list.len() <= best.len() {
                (list, *best)
            } else {
                (*best, list)
            };
            if long[..short.len()] != *short {
                return Err(Violation::IncompatibleOrder {
                    key,
                    txns: (*by, reader),
                });
            }
            if list.len() > best.len() {
                *best = list;
                *by = reader;
            }
        }
        Ok(longest
            .into_iter()
            .map(|(k, (list, _))| (k, list.to_vec()))
            .collect())
    }

    /// Fails on a committed append to a key that a final read (a committed transaction of process
    /// [`OBSERVER_WORKER`], which runs after all others) read without it.
    fn check_final_reads(&self, orders: &FxHashMap<u64, Vec<u64>>) -> Result<(), Violation> {
        let finals: FxHashSet<u64> = self
            .ok_reads()
            .filter(|&(i, _, _)| self.txns[i].process == OBSERVER_WORKER)
            .map(|(_, key, _)| key)
            .collect();
        if finals.is_empty() {
            return Ok(());
        }
        let ordered: FxHashSet<(u64, u64)> = orders
            .iter()
            .filter(|(k, _)| finals.contains(k))
            .flat_map(|(k, order)| order.iter().map(move |v| (*k, *v)))
            .collect();
        for (i, t) in self.txns.iter().enumerate() {
            if t.outcome != Outcome::Ok {
                continue;
            }
            for (key, value) in appends(t) {
                if finals.contains(&key) && !ordered.contains(&(key, value)) {
                    return Err(Violation::LostAppend { txn: i, key, value });
                }
            }
        }
        Ok(())
    }

    /// Every read of a committed transaction: position, key and list.
    fn ok_reads(&self) -> impl Iterator<Item = (usize, u64, &[u64])> {
        self.txns
            .iter()
            .enumerate()
            .filter(|(_, t)| t.outcome == Outcome::Ok)
            .flat_map(|(i, t)| {
                t.mops.iter().filter_map(move |m| match m {
                    Mop::Read {
                        key,
                        list: Some(list),
                    } => Some((i, *key, list.as_slice())),
                    _ => None,
                })
            })
    }

    /// Checks each committed read on its own: a value, no element twice, elements someone
    /// committed, no intermediate state, and agreement with the transaction's other accesses.
    fn check_reads(&self, sources: &FxHashMap<(u64, u64), Source>) -> Result<(), Violation> {
        for (i, t) in self.txns.iter().enumerate() {
            if t.outcome != Outcome::Ok {
                continue;
            }
            // Per key: the state the transaction saw outside its own appends, and those appends.
            let mut seen: FxHashMap<u64, (Option<&[u64]>, Vec<u64>)> = FxHashMap::default();
            for m in &t.mops {
                let (key, list) = match m {
                    Mop::Append { key, value } => {
                        seen.entry(*key).or_default().1.push(*value);
                        continue;
                    }
                    Mop::Add { .. } | Mop::Count { .. } => continue,
                    Mop::Read { key, list: None } => {
                        return Err(Violation::MissingReadValue { txn: i, key: *key });
                    }
                    Mop::Read {
                        key,
                        list: Some(list),
                    } => (*key, list.as_slice()),
                };
                let mut distinct = FxHashSet::default();
                for &v in list {
                    if !distinct.insert(v) {
                        return Err(Violation::DuplicateElement {
                            txn: i,
                            key,
                            value: v,
                        });
                    }
                    match sources.get(&(key, v)) {
                        None => {
                            return Err(Violation::UnknownElement {
                                txn: i,
                                key,
                                value: v,
                            });
                        }
                        Some(&Source::Txn(w, _)) if self.txns[w].outcome == Outcome::Fail => {
                            return Err(Violation::AbortedRead {
                                txn: i,
                                key,
                                value: v,
                                writer: w,
                            });
                        }
                        _ => {}
                    }
                }
                let (outside, own) = seen.entry(key).or_default();
                let Some(external) = list.strip_suffix(own.as_slice()) else {
                    return Err(Violation::Internal { txn: i, key });
                };
                if outside.is_some_and(|o| o != external) {
                    return Err(Violation::Internal { txn: i, key });
                }
                *outside = Some(external);
                if let Some(&last) = external.last()
                    && let Some(&Source::Txn(w, true)) = sources.get(&(key, last))
                    && w != i
                {
                    return Err(Violation::IntermediateRead {
                        txn: i,
                        key,
                        value: last,
                        writer: w,
                    });
                }
            }
        }
        Ok(())
    }

    /// The plain history the version orders imply: a version per element, each committed (or
    /// observed indeterminate) transaction reading the state it saw outside its own appends and
    /// writing one version per append over the element before it in the key's order, and a loader
    /// (id `txns.len()`) installing [`LOADED`] on the loaded keys.
    fn plain(&self, orders: &FxHashMap<u64, Vec<u64>>) -> History {
        let loaded: FxHashMap<u64, &[u64]> = self
            .loaded
            .iter()
            .map(|(k, l)| (*k, l.as_slice()))
            .collect();
        let position: FxHashMap<(u64, u64), usize> = orders
            .iter()
            .flat_map(|(k, order)| order.iter().enumerate().map(move |(i, v)| ((*k, *v), i)))
            .collect();
        // The version of `key` whose list is `list` (a prefix of the key's order).
        let version_of = |key: u64, list: &[u64]| -> Version {
            match list.last() {
                None => ABSENT,
                Some(_) if loaded.get(&key).is_some_and(|l| *l == list) => LOADED,
                Some(&v) => v,
            }
        };
        let mut h = History::default();
        if !self.loaded.is_empty() {
            h.push(TxnEvent {
                id: self.txns.len() as u64,
                worker: LOAD_WORKER,
                reads: Vec::new(),
                writes: self
                    .loaded
                    .iter()
                    .filter(|(_, list)| !list.is_empty())
                    .map(|(key, _)| WriteEvent {
                        item: Item::new(0, *key),
                        version: LOADED,
                        prev: ABSENT,
                        kind: WriteKind::Insert,
                    })
                    .collect(),
                split_ops: Vec::new(),
                merges: Vec::new(),
            });
        }
        for (i, t) in self.txns.iter().enumerate() {
            let observed = |key, value| position.contains_key(&(key, value));
            let keep = match t.outcome {
                Outcome::Ok => true,
                Outcome::Fail => false,
                Outcome::Info => appends(t).any(|(k, v)| observed(k, v)),
            };
            if !keep {
                continue;
            }
            let mut ev = TxnEvent {
                id: i as u64,
                worker: t.process,
                reads: Vec::new(),
                writes: Vec::new(),
                split_ops: Vec::new(),
                merges: Vec::new(),
            };
            let mut own: FxHashMap<u64, usize> = FxHashMap::default();
            let mut read: FxHashSet<u64> = FxHashSet::default();
            for m in &t.mops {
                match m {
                    Mop::Read {
                        key,
                        list: Some(list),
                    } if t.outcome == Outcome::Ok => {
                        let mine = own.get(key).copied().unwrap_or(0);
                        if read.insert(*key) {
                            ev.reads.push(ReadEvent {
                                item: Item::new(0, *key),
                                version: version_of(*key, &list[..list.len() - mine]),
                            });
                        }
                    }
                    Mop::Append { key, value } => {
                        *own.entry(*key).or_default() += 1;
                        let prev = match position.get(&(*key, *value)) {
                            Some(&at) => version_of(*key, &orders[key][..at]),
                            // Never observed: placed after no version, so it orders nothing.
                            None if t.outcome == Outcome::Ok => ELEMENT_LIMIT | value,
                            None => continue,
                        };
                        ev.writes.push(WriteEvent {
                            item: Item::new(0, *key),
                            version: *value,
                            prev,
                            kind: if prev == ABSENT {
                                WriteKind::Insert
                            } else {
                                WriteKind::Update
                            },
                        });
                    }
                    _ => {}
                }
            }
            h.push(ev);
        }
        h
    }

    /// The history as Elle's list-append EDN: the loaded lists as a first transaction of their own
    /// (process [`LOAD_WORKER`]), then each process's transactions as an `:invoke` (reads `nil`)
    /// and its completion (`:ok` with what the reads returned, `:fail` or `:info`), one map per
    /// line. Counter micro-operations are left out: Elle's model has none. Check it with Elle's
    /// `serializable` model (the order between processes in the file is invented).
    pub fn to_elle_edn(&self) -> String {
        let mut out = String::new();
        let mut index = 0u64;
        let mut op = |out: &mut String, kind: &str, process: u32, mops: &str| {
            let _ = writeln!(
                out,
                "{{:type {kind}, :f :txn, :value [{mops}], :process {process}, :index {index}}}"
            );
            index += 1;
        };
        if !self.loaded.is_empty() {
            let mut mops = String::new();
            for (key, list) in &self.loaded {
                for v in list {
                    let _ = write!(mops, "{}[:append {key} {v}]", sep(&mops));
                }
            }
            op(&mut out, ":invoke", LOAD_WORKER, &mops);
            op(&mut out, ":ok", LOAD_WORKER, &mops);
        }
        let mut by_process: BTreeMap<u32, Vec<&Txn>> = BTreeMap::new();
        for t in &self.txns {
            by_process.entry(t.process).or_default().push(t);
        }
        let (mut invoke, mut done) = (String::new(), String::new());
        for (process, txns) in by_process {
            for t in txns {
                invoke.clear();
                done.clear();
                for m in &t.mops {
                    match m {
                        Mop::Append { key, value } => {
                            let _ = write!(invoke, "{}[:append {key} {value}]", sep(&invoke));
                            let _ = write!(done, "{}[:append {key} {value}]", sep(&done));
                        }
                        Mop::Read { key, list } => {
                            let _ = write!(invoke, "{}[:r {key} nil]", sep(&invoke));
                            let _ = write!(done, "{}[:r {key} ", sep(&done));
                            match list {
                                Some(list) if t.outcome == Outcome::Ok => {
                                    done.push('[');
                                    for (j, v) in list.iter().enumerate() {
                                        let _ = write!(done, "{}{v}", if j > 0 { " " } else { "" });
                                    }
                                    done.push_str("]]");
                                }
                                _ => done.push_str("nil]"),
                            }
                        }
                        Mop::Add { .. } | Mop::Count { .. } => {}
                    }
                }
                let kind = match t.outcome {
                    Outcome::Ok => ":ok",
                    Outcome::Fail => ":fail",
                    Outcome::Info => ":info",
                };
                op(&mut out, ":invoke", process, &invoke);
                op(&mut out, kind, process, &done);
            }
        }
        out
    }

    /// Serializes the history as JSON (the `observed` part of `docs/history.md`'s format).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a list-append history always serializes")
    }
}

/// A space before every micro-operation but the first.
fn sep(s: &str) -> &'static str {
    if s.is_empty() { "" } else { " " }
}

/// The `(key, element)` appends of `t`, in order.
fn appends(t: &Txn) -> impl Iterator<Item = (u64, u64)> + '_ {
    t.mops.iter().filter_map(|m| match m {
        Mop::Append { key, value } => Some((*key, *value)),
        _ => None,
    })
}
