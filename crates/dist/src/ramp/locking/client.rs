//! The lock plans of the lock-based baselines: which locks a transaction takes, in key order.

use crate::ramp::msg::{Key, LockMode, TxnSpec};

fn sorted(mut v: Vec<(Key, LockMode)>) -> Vec<(Key, LockMode)> {
    v.sort_by_key(|l| l.0);
    v.dedup_by_key(|l| l.0);
    v
}

/// LWLR: every read and written item, in key order; a written item is locked exclusively.
pub fn lwlr_plan(txn: &TxnSpec) -> Vec<(Key, LockMode)> {
    let mut v: Vec<(Key, LockMode)> = txn
        .writes
        .iter()
        .map(|(k, _)| (*k, LockMode::Write))
        .collect();
    for &k in &txn.reads {
        if !v.iter().any(|l| l.0 == k) {
            v.push((k, LockMode::Read));
        }
    }
    sorted(v)
}

/// LWSR reads: a short read lock per item, in key order.
pub fn short_read_plan(txn: &TxnSpec) -> Vec<(Key, LockMode)> {
    sorted(
        txn.reads
            .iter()
            .map(|&k| (k, LockMode::ShortRead))
            .collect(),
    )
}

/// LWNR and LWSR writes: an exclusive lock per written item, in key order.
pub fn write_plan(txn: &TxnSpec) -> Vec<(Key, LockMode)> {
    sorted(
        txn.writes
            .iter()
            .map(|(k, _)| (*k, LockMode::Write))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_in_key_order_with_the_strongest_mode_per_item() {
        let txn = TxnSpec {
            reads: vec![9, 3, 5],
            writes: vec![(5, vec![1]), (1, vec![2])],
        };
        assert_eq!(
            lwlr_plan(&txn),
            vec![
                (1, LockMode::Write),
                (3, LockMode::Read),
                (5, LockMode::Write),
                (9, LockMode::Read)
            ]
        );
        assert_eq!(
            write_plan(&txn),
            vec![(1, LockMode::Write), (5, LockMode::Write)]
        );
        assert_eq!(short_read_plan(&txn)[0], (3, LockMode::ShortRead));
    }
}
