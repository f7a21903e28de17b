//! Read Atomic isolation (Bailis et al., SIGMOD 2014, §3.1): a checker over recorded histories.
//!
//! A transaction has a *fractured read* when it reads version `x_i` written by `T_j`, `T_j` also wrote
//! `y_j`, and the transaction read `y_k` with `y_k` before `y_j` in `y`'s version order. RA forbids
//! fractured reads and reads of uncommitted, aborted or intermediate data. Versions are ordered per
//! item by the `order` of the write that created them (RAMP: the timestamp; E-PCI: commit time, then
//! timestamp); version 0 is the initial null value and comes before everything.

use std::fmt;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::history::{Item, Version};

/// The position of a version in its item's version order.
pub type VersionOrder = (u64, u64);

/// One read: the version of an item a transaction returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaRead {
    /// The item.
    pub item: Item,
    /// The version read (0: the initial value).
    pub version: Version,
}

/// One write: the version it created and that version's place in the item's order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaWrite {
    /// The item.
    pub item: Item,
    /// The version created (unique per item, never 0).
    pub version: Version,
    /// Its position in the item's version order.
    pub order: VersionOrder,
}

/// A transaction as the clients saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaTxn {
    /// Unique id within the history.
    pub id: u64,
    /// What it read.
    pub reads: Vec<RaRead>,
    /// What it wrote.
    pub writes: Vec<RaWrite>,
}

/// Committed transactions, and aborted ones whose versions nobody may read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaHistory {
    /// Transactions that committed.
    pub committed: Vec<RaTxn>,
    /// Transactions that aborted (their writes must never be read).
    pub aborted: Vec<RaTxn>,
}

/// A violation of Read Atomic isolation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaAnomaly {
    /// `reader` saw `writer`'s version of `item` but an older version of `sibling` than `writer` wrote.
    FracturedRead {
        /// The transaction with the fractured read.
        reader: u64,
        /// The transaction only partly observed.
        writer: u64,
        /// The item whose version from `writer` was read.
        item: Item,
        /// The sibling item read too early.
        sibling: Item,
        /// The sibling version read.
        read: Version,
        /// The sibling version `writer` installed.
        written: Version,
    },
    /// `reader` saw a version written by an aborted transaction.
    AbortedRead {
        /// The reader.
        reader: u64,
        /// The aborted writer.
        writer: u64,
        /// The item.
        item: Item,
        /// The version.
        version: Version,
    },
    /// `reader` saw a version no committed transaction wrote (uncommitted or invented data).
    UncommittedRead {
        /// The reader.
        reader: u64,
        /// The item.
        item: Item,
        /// The version.
        version: Version,
    },
}

impl fmt::Display for RaAnomaly {
    /// One line naming the transactions, items and versions involved.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaAnomaly::FracturedRead {
                reader,
                writer,
                item,
                sibling,
                read,
                written,
            } => write!(
                f,
                "fractured read: txn {reader} read {item} from txn {writer} but {sibling} at version {read}, \
                 older than txn {writer}'s version {written}"
            ),
            RaAnomaly::AbortedRead {
                reader,
                writer,
                item,
                version,
            } => write!(
                f,
                "txn {reader} read {item} version {version} written by aborted txn {writer}"
            ),
            RaAnomaly::UncommittedRead {
                reader,
                item,
                version,
            } => write!(
                f,
                "txn {reader} read {item} version {version}, which no committed txn wrote"
            ),
        }
    }
}

/// What a successful check looked at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaStats {
    /// Committed transactions.
    pub transactions: usize,
    /// Reads checked.
    pub reads: usize,
    /// Reads of a non-initial version whose writer wrote more than one item (the interesting ones).
    pub sibling_checks: usize,
}

/// Checks `history` for Read Atomic isolation; returns at most `limit` anomalies when it fails.
pub fn check_read_atomic(history: &RaHistory, limit: usize) -> Result<RaStats, Vec<RaAnomaly>> {
    let mut writer_of: FxHashMap<(Item, Version), (usize, VersionOrder)> = FxHashMap::default();
    for (i, t) in history.committed.iter().enumerate() {
        for w in &t.writes {
            writer_of.insert((w.item, w.version), (i, w.order));
        }
    }
    let mut aborted_of: FxHashMap<(Item, Version), u64> = FxHashMap::default();
    for t in &history.aborted {
        for w in &t.writes {
            aborted_of.insert((w.item, w.version), t.id);
        }
    }
    let order_of = |item: Item, version: Version| -> Option<VersionOrder> {
        if version == 0 {
            Some((0, 0))
        } else {
            writer_of.get(&(item, version)).map(|x| x.1)
        }
    };
    let mut stats = RaStats {
        transactions: history.committed.len(),
        ..RaStats::default()
    };
    let mut anomalies = Vec::new();
    for (ti, t) in history.committed.iter().enumerate() {
        let read_at: FxHashMap<Item, Version> =
            t.reads.iter().map(|r| (r.item, r.version)).collect();
        for r in &t.reads {
            stats.reads += 1;
            if r.version == 0 {
                continue;
            }
            let Some(&(wi, _)) = writer_of.get(&(r.item, r.version)) else {
                anomalies.push(match aborted_of.get(&(r.item, r.version)) {
                    Some(&writer) => RaAnomaly::AbortedRead {
                        reader: t.id,
                        writer,
                        item: r.item,
                        version: r.version,
                    },
                    None => RaAnomaly::UncommittedRead {
                        reader: t.id,
                        item: r.item,
                        version: r.version,
                    },
                });
                if anomalies.len() >= limit {
                    return Err(anomalies);
                }
                continue;
            };
            if wi == ti {
                continue;
            }
            let writer = &history.committed[wi];
            if writer.writes.len() > 1 {
                stats.sibling_checks += 1;
            }
            for w in &writer.writes {
                if w.item == r.item {
                    continue;
                }
                let Some(&seen) = read_at.get(&w.item) else {
                    continue;
                };
                let too_old = order_of(w.item, seen).is_some_and(|o| o < w.order);
                if too_old {
                    anomalies.push(RaAnomaly::FracturedRead {
                        reader: t.id,
                        writer: writer.id,
                        item: r.item,
                        sibling: w.item,
                        read: seen,
                        written: w.version,
                    });
                    if anomalies.len() >= limit {
                        return Err(anomalies);
                    }
                }
            }
        }
    }
    if anomalies.is_empty() {
        Ok(stats)
    } else {
        Err(anomalies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(key: u64, version: Version) -> RaRead {
        RaRead {
            item: Item::new(0, key),
            version,
        }
    }

    fn write(key: u64, version: Version) -> RaWrite {
        RaWrite {
            item: Item::new(0, key),
            version,
            order: (0, version),
        }
    }

    fn txn(id: u64, reads: Vec<RaRead>, writes: Vec<RaWrite>) -> RaTxn {
        RaTxn { id, reads, writes }
    }

    #[test]
    fn figure_one_first_round_is_a_fractured_read_and_the_repaired_read_is_not() {
        let w = txn(1, vec![], vec![write(1, 10), write(2, 10)]);
        let fractured = RaHistory {
            committed: vec![w.clone(), txn(2, vec![read(1, 10), read(2, 0)], vec![])],
            aborted: vec![],
        };
        let err = check_read_atomic(&fractured, 10).unwrap_err();
        assert!(
            matches!(
                err[0],
                RaAnomaly::FracturedRead {
                    reader: 2,
                    writer: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        let repaired = RaHistory {
            committed: vec![w, txn(2, vec![read(1, 10), read(2, 10)], vec![])],
            aborted: vec![],
        };
        let stats = check_read_atomic(&repaired, 10).unwrap();
        assert_eq!(
            (stats.transactions, stats.reads, stats.sibling_checks),
            (2, 2, 2)
        );
    }

    #[test]
    fn a_newer_sibling_version_is_not_fractured() {
        let h = RaHistory {
            committed: vec![
                txn(1, vec![], vec![write(1, 10), write(2, 10)]),
                txn(2, vec![], vec![write(2, 20)]),
                txn(3, vec![read(1, 10), read(2, 20)], vec![]),
            ],
            aborted: vec![],
        };
        assert!(check_read_atomic(&h, 10).is_ok());
    }

    #[test]
    fn reads_of_aborted_or_unknown_versions_are_reported() {
        let h = RaHistory {
            committed: vec![txn(2, vec![read(1, 10), read(2, 30)], vec![])],
            aborted: vec![txn(1, vec![], vec![write(1, 10)])],
        };
        let err = check_read_atomic(&h, 10).unwrap_err();
        assert_eq!(err.len(), 2);
        assert!(matches!(err[0], RaAnomaly::AbortedRead { writer: 1, .. }));
        assert!(matches!(
            err[1],
            RaAnomaly::UncommittedRead { version: 30, .. }
        ));
        assert!(err[1].to_string().contains("no committed txn wrote"));
    }
}
