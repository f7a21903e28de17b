//! Validation of transactions submitted from outside (client library, proxies).

use crate::ramp::msg::TxnSpec;

/// Largest number of items one transaction may read or write.
pub const MAX_TXN_ITEMS: usize = 1 << 16;

/// Refuses transactions that read or write an item twice, do nothing, or are too large.
pub fn validate(txn: &TxnSpec) -> Result<(), String> {
    if txn.reads.is_empty() && txn.writes.is_empty() {
        return Err("a transaction must read or write at least one item".into());
    }
    if txn.reads.len() > MAX_TXN_ITEMS || txn.writes.len() > MAX_TXN_ITEMS {
        return Err(format!(
            "a transaction may touch at most {MAX_TXN_ITEMS} items"
        ));
    }
    let mut reads = txn.reads.clone();
    reads.sort_unstable();
    if reads.windows(2).any(|w| w[0] == w[1]) {
        return Err("a transaction reads an item twice".into());
    }
    let mut writes: Vec<u64> = txn.writes.iter().map(|w| w.0).collect();
    writes.sort_unstable();
    if writes.windows(2).any(|w| w[0] == w[1]) {
        return Err("a transaction writes an item twice".into());
    }
    Ok(())
}
