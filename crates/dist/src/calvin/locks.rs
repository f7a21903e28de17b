//! Calvin's deterministic lock manager (Thomson et al. 2012, §4.2): every node requests the locks
//! of the transactions it takes part in strictly in the global order, one transaction's whole lock
//! set at a time, and grants each record's lock in the order requested, so two transactions that
//! conflict run in the global order on every replica and no deadlock can form. Locks are shared
//! (reads) or exclusive (writes); a key is a record (or a coarser unit a workload names) owned by
//! this node.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// A transaction's place in the global order: batch in the high 32 bits, index in the low.
pub type TxnId = u64;

/// The id of transaction `index` of `batch`.
pub fn txn_id(batch: u64, index: u32) -> TxnId {
    (batch << 32) | index as u64
}

/// The batch of a transaction.
pub fn batch_of(id: TxnId) -> u64 {
    id >> 32
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    txn: TxnId,
    write: bool,
    granted: bool,
}

/// The lock table of one node, and how many locks each transaction still waits for.
#[derive(Default)]
pub struct LockManager {
    queues: FxHashMap<u64, VecDeque<Waiter>>,
    waiting: FxHashMap<TxnId, u32>,
    spare: Vec<VecDeque<Waiter>>,
}

impl LockManager {
    /// Requests `locks` (key, write) for `txn`, after every transaction before it in the global
    /// order; keys must be distinct. Returns true when all are granted at once.
    pub fn acquire(&mut self, txn: TxnId, locks: &[(u64, bool)]) -> bool {
        let mut ungranted = 0;
        for &(key, write) in locks {
            let q = self
                .queues
                .entry(key)
                .or_insert_with(|| self.spare.pop().unwrap_or_default());
            let granted = q.is_empty() || (!write && q.iter().all(|w| w.granted && !w.write));
            q.push_back(Waiter {
                txn,
                write,
                granted,
            });
            ungranted += u32::from(!granted);
        }
        if ungranted > 0 {
            self.waiting.insert(txn, ungranted);
        }
        ungranted == 0
    }

    /// Releases `txn`'s locks on `keys` and appends to `ready` the transactions that now hold all
    /// of theirs.
    pub fn release(&mut self, txn: TxnId, keys: &[u64], ready: &mut Vec<TxnId>) {
        for key in keys {
            let Some(q) = self.queues.get_mut(key) else {
                continue;
            };
            if let Some(at) = q.iter().position(|w| w.txn == txn) {
                q.remove(at);
            }
            for (i, w) in q.iter_mut().enumerate() {
                if w.write && i > 0 {
                    break;
                }
                if !w.granted {
                    w.granted = true;
                    let left = self.waiting.get_mut(&w.txn).expect("a waiter waits");
                    *left -= 1;
                    if *left == 0 {
                        self.waiting.remove(&w.txn);
                        ready.push(w.txn);
                    }
                }
                if w.write {
                    break;
                }
            }
            if q.is_empty() {
                let q = self.queues.remove(key).expect("present");
                self.spare.push(q);
            }
        }
    }

    /// Keys with a queue (held or awaited locks).
    pub fn locked_keys(&self) -> usize {
        self.queues.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicting_locks_are_granted_in_request_order() {
        let mut lm = LockManager::default();
        assert!(lm.acquire(1, &[(10, false), (11, true)]));
        assert!(lm.acquire(2, &[(10, false)]), "reads share");
        assert!(!lm.acquire(3, &[(10, true)]), "a write waits for the reads");
        assert!(
            !lm.acquire(4, &[(10, false)]),
            "a read behind a waiting write waits"
        );
        let mut ready = Vec::new();
        lm.release(1, &[10, 11], &mut ready);
        assert!(ready.is_empty());
        lm.release(2, &[10], &mut ready);
        assert_eq!(ready, vec![3]);
        ready.clear();
        lm.release(3, &[10], &mut ready);
        assert_eq!(ready, vec![4]);
        lm.release(4, &[10], &mut ready);
        assert_eq!(lm.locked_keys(), 0);
    }

    #[test]
    fn ids_keep_the_global_order() {
        assert!(txn_id(1, u32::MAX) < txn_id(2, 0));
        assert_eq!(batch_of(txn_id(7, 3)), 7);
    }
}
