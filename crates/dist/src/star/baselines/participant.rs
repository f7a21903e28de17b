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
            StarMsg::Fetch { txn, lock, keys } => {
                self.buf.clear();
                let ok = if *lock {
                    let r = self.remote.entry((home, *txn)).or_default();
                    keys.iter()
                        .all(|&(t, k)| valid_table(db, t) && r.locks.lock(db, t, k).is_ok())
                        && db
                            .read_rows(keys.iter().copied(), Some(&r.locks), &mut self.buf)
                            .is_ok()
                } else {
                    let keys = keys.iter().copied().filter(|&(t, _)| valid_table(db, t));
                    db.read_rows(keys, None, &mut self.buf).is_ok()
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
            StarMsg::Prepare { txn, writes, reads } => {
                let r = self.remote.entry((home, *txn)).or_default();
                let locked = writes
                    .iter()
                    .all(|&(t, k)| valid_table(db, t) && r.locks.lock(db, t, k) == Ok(true));
                r.reads.clone_from(reads);
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

fn validate(db: &Database<Star>, r: &Remote) -> bool {
    r.reads
        .iter()
        .all(|&(t, k, g, w)| valid_table(db, t) && r.locks.validate(db, t, k, g, w))
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
