//! The participant side of Dist-OCC and Dist-S2PL (STAR §8.1.2): what a partition's primary does
//! for transactions other nodes run — remote reads, locks, votes, installs — each answered at once
//! on the node's thread (nothing here waits).

use std::collections::HashMap;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{Database, RowLocks, Star};

use crate::star::msg::StarMsg;

/// One remote transaction's state here: its locks and the reads its prepare validated.
#[derive(Default)]
struct Remote {
    locks: RowLocks,
    reads: Vec<(u32, u64, u8, u64)>,
    /// The key ranges its prepare named, checked for phantoms with the reads.
    scans: Vec<(u32, u64, u64)>,
    /// Decided with `hold`: its locks wait for [`StarMsg::Release`].
    holding: bool,
    /// [`StarMsg::Release`] came before the decision (the network reordered them).
    release_early: bool,
}

/// The remote transactions a node takes part in, by home node and the home's id.
#[derive(Default)]
pub(crate) struct Participant {
    remote: HashMap<(Addr, u64), Remote>,
    buf: Vec<u8>,
    /// The rows a fetch's scans found (table, key), and one range's keys.
    scanned: Vec<(u32, u64)>,
    range: Vec<u64>,
}

impl Participant {
    /// Whether no remote transaction holds anything here.
    pub(crate) fn is_idle(&self) -> bool {
        self.remote.is_empty()
    }

    /// Handles a participant's message from `home`; false if `msg` is not one.
    pub(crate) fn on_message<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        db: &Database<Star>,
        home: Addr,
        msg: &StarMsg,
    ) -> bool {
        match msg {
            StarMsg::Fetch {
                txn,
                lock,
                keys,
                scans,
            } => {
                self.buf.clear();
                self.scanned.clear();
                let mut ok = true;
                for &(t, lo, hi) in scans {
                    self.range.clear();
                    ok &= db.range_keys(t, lo, hi, &mut self.range);
                    self.scanned.extend(self.range.iter().map(|&k| (t, k)));
                }
                let rows = || keys.iter().chain(self.scanned.iter()).copied();
                let ok = ok
                    && if *lock {
                        let r = self.remote.entry((home, *txn)).or_default();
                        rows().all(|(t, k)| valid_table(db, t) && r.locks.lock(db, t, k).is_ok())
                            && db.read_rows(rows(), Some(&r.locks), &mut self.buf).is_ok()
                    } else {
                        let rows = rows().filter(|&(t, _)| valid_table(db, t));
                        db.read_rows(rows, None, &mut self.buf).is_ok()
                    };
                if !ok {
                    self.buf.clear();
                }
                let bytes = std::mem::take(&mut self.buf);
                net.send(
                    home,
                    StarMsg::Rows {
                        txn: *txn,
                        ok,
                        bytes,
                    },
                );
            }
            StarMsg::Prepare {
                txn,
                writes,
                reads,
                scans,
            } => {
                let r = self.remote.entry((home, *txn)).or_default();
                let locked = writes
                    .iter()
                    .all(|&(t, k)| valid_table(db, t) && r.locks.lock(db, t, k) == Ok(true));
                r.reads.clone_from(reads);
                r.scans.clone_from(scans);
                net.send(home, vote(db, *txn, Some(r), locked));
            }
            StarMsg::Validate { txn } => {
                net.send(home, vote(db, *txn, self.remote.get(&(home, *txn)), true));
            }
            StarMsg::Decide {
                txn,
                commit,
                hold,
                bytes,
            } => {
                let Some(r) = self.remote.get_mut(&(home, *txn)) else {
                    return true;
                };
                // A malformed batch installs nothing; the locks are still released.
                let installed = *commit && r.locks.install(db, bytes).is_ok();
                if installed && *hold && !r.release_early {
                    r.holding = true;
                } else if let Some(mut r) = self.remote.remove(&(home, *txn)) {
                    r.locks.release(db);
                }
            }
            StarMsg::Release { txn } => match self.remote.get_mut(&(home, *txn)) {
                Some(r) if r.holding => {
                    r.locks.release(db);
                    self.remote.remove(&(home, *txn));
                }
                Some(r) => r.release_early = true,
                None => {}
            },
            _ => return false,
        }
        true
    }
}

fn valid_table(db: &Database<Star>, t: u32) -> bool {
    (t as usize) < db.tables().len()
}

/// Whether every read still holds its version and no scanned range holds a row that was not
/// read (a phantom: a row inserted, or an insert in progress, since the scan). With the reads
/// validated, a range whose rows were all read is the range the home's scan saw: a read row
/// deleted since changed its version.
fn validate(db: &Database<Star>, r: &Remote) -> bool {
    let reads_valid = r
        .reads
        .iter()
        .all(|&(t, k, g, w)| valid_table(db, t) && r.locks.validate(db, t, k, g, w));
    reads_valid
        && r.scans.iter().all(|&(t, lo, hi)| {
            let mut keys = Vec::new();
            db.range_keys(t, lo, hi, &mut keys)
                && keys
                    .iter()
                    .all(|&k| r.reads.iter().any(|&(rt, rk, _, _)| rt == t && rk == k))
        })
}

/// The participant's vote on `txn`: yes if `locked` and its reads still validate, with the highest
/// TID of the rows it locked (the home commits above it).
fn vote(db: &Database<Star>, txn: u64, r: Option<&Remote>, locked: bool) -> StarMsg {
    StarMsg::Vote {
        txn,
        yes: locked && r.is_some_and(|r| validate(db, r)),
        floor: r.map_or(0, |r| r.locks.max_tid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_storage::{ColumnType, Schema, TableSpec};
    use phasedb_txn::{Config, StarMode};

    /// What a participant sends, kept in order.
    #[derive(Default)]
    struct Sent(Vec<StarMsg>);

    impl Transport<StarMsg> for Sent {
        fn now(&self) -> u64 {
            0
        }
        fn send(&mut self, _to: Addr, msg: StarMsg) {
            self.0.push(msg);
        }
    }

    impl Sent {
        fn last_vote(&self) -> bool {
            match self.0.last() {
                Some(StarMsg::Vote { yes, .. }) => *yes,
                m => panic!("no vote: {m:?}"),
            }
        }
    }

    /// A database with one ordered table of keys 0, 2, .., 18 as loaded.
    fn ordered_db() -> (Database<Star>, u32) {
        let mut db = Database::<Star>::open(Config::default());
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .build()
            .unwrap();
        let t = db.create_table(TableSpec::new("t", schema, 64).ordered());
        for k in (0..20).step_by(2) {
            db.load(t, k, |r| r.set_u64(0, k)).unwrap();
        }
        db.set_star_mode(StarMode::SingleMaster);
        (db, t)
    }

    /// A scan fetched from a participant brings the range's rows, and the prepare that names the
    /// range votes yes while the range holds only the rows the transaction read, and no once a
    /// row was inserted into it (a phantom), though every row read kept its version.
    #[test]
    fn a_row_inserted_into_a_scanned_range_fails_the_vote() {
        let (db, t) = ordered_db();
        let mut p = Participant::default();
        let mut net = Sent::default();
        let home = 1;
        let fetch = StarMsg::Fetch {
            txn: 7,
            lock: false,
            keys: Vec::new(),
            scans: vec![(t, 3, 9)],
        };
        assert!(p.on_message(&mut net, &db, home, &fetch));
        let Some(StarMsg::Rows {
            ok: true, bytes, ..
        }) = net.0.last()
        else {
            panic!("no rows: {:?}", net.0.last());
        };
        let mut copy = Database::<Star>::open(Config::default());
        let schema = db.table(t).schema().clone();
        let ct = copy.create_table(TableSpec::new("t", schema, 64).ordered());
        assert_eq!(copy.cache_rows(bytes).unwrap(), 3, "rows 4, 6 and 8");
        let mut keys = Vec::new();
        assert!(copy.range_keys(ct, 0, 19, &mut keys));
        assert_eq!(keys, vec![4, 6, 8]);

        // Loaded rows carry TID word 0: the versions the home read.
        let reads: Vec<(u32, u64, u8, u64)> = keys.iter().map(|&k| (t, k, 0, 0)).collect();
        let prepare = StarMsg::Prepare {
            txn: 7,
            writes: Vec::new(),
            reads: reads.clone(),
            scans: vec![(t, 3, 9)],
        };
        p.on_message(&mut net, &db, home, &prepare);
        assert!(net.last_vote(), "the range holds what was read");

        db.execute(|tx| tx.insert(t, 5, |r| r.set_u64(0, 5)))
            .unwrap();
        p.on_message(&mut net, &db, home, &StarMsg::Validate { txn: 7 });
        assert!(!net.last_vote(), "row 5 is a phantom");

        let narrower = StarMsg::Prepare {
            txn: 8,
            writes: Vec::new(),
            reads,
            scans: vec![(t, 6, 9)],
        };
        p.on_message(&mut net, &db, home, &narrower);
        assert!(net.last_vote(), "row 5 is outside a scan of 6..=9");
        let unordered = StarMsg::Prepare {
            txn: 9,
            writes: Vec::new(),
            reads: Vec::new(),
            scans: vec![(t + 1, 0, 9)],
        };
        p.on_message(&mut net, &db, home, &unordered);
        assert!(!net.last_vote(), "a range of no table");
    }
}
