//! Choosing a customer by id or by last name, shared by Payment and OrderStatus (clauses 2.5.2.2
//! and 2.6.2.2).

use phasedb_txn::{Protocol, Tx, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use super::random::{NuRandC, customer_id, last_name_number};
use super::schema::{MAX_C, Tables, customer_name, customer_name_key, customer_of_name_key};

/// How a transaction names its customer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CustomerBy {
    /// By `C_ID`.
    Id(u32),
    /// By last name, given as its number (0..=999).
    LastName(u32),
}

impl Default for CustomerBy {
    fn default() -> Self {
        CustomerBy::Id(1)
    }
}

impl CustomerBy {
    /// 60% by last name NURand(255, 0, 999), 40% by id NURand(1023, 1, 3000).
    pub fn generate(rng: &mut SmallRng, c: &NuRandC) -> CustomerBy {
        if rng.random_range(1..=100) <= 60 {
            CustomerBy::LastName(last_name_number(rng, c))
        } else {
            CustomerBy::Id(customer_id(rng, c))
        }
    }
}

/// The `C_ID` of the customer of district (w, d) named by `by`: for a last name, the customer at
/// position ceil(n / 2) of the n customers with that name sorted by `C_FIRST`, found through the
/// last-name index. `matches` is scratch space.
pub fn find<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
    d: u32,
    by: CustomerBy,
    matches: &mut Vec<([u8; 16], u32)>,
) -> TxResult<u32> {
    let last = match by {
        CustomerBy::Id(c) => return Ok(c),
        CustomerBy::LastName(last) => last,
    };
    matches.clear();
    let lo = customer_name_key(w, d, last, 0);
    let hi = customer_name_key(w, d, last, MAX_C);
    let cols = columns(&[customer_name::C_FIRST]);
    tx.scan(t.customer_name, lo, hi, usize::MAX, cols, |key, row| {
        let mut first = [0u8; 16];
        first.copy_from_slice(row.bytes(customer_name::C_FIRST));
        matches.push((first, customer_of_name_key(key)));
        true
    })?;
    if matches.is_empty() {
        return Err(super::missing("no customer has the last name"));
    }
    matches.sort_unstable();
    Ok(matches[(matches.len() - 1) / 2].1)
}
