//! The Order-Status transaction (clause 2.6): reads a customer's balance and the lines of their
//! most recent order.

use phasedb_txn::{Protocol, Tx, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;

use super::customer::{self as by, CustomerBy};
use super::random::NuRandC;
use super::schema::*;
use super::{Scratch, missing};

/// The terminal input of an Order-Status (clause 2.6.1).
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The customer's warehouse (the home warehouse).
    pub w_id: u32,
    /// The customer's district.
    pub d_id: u32,
    /// The customer, by id or last name.
    pub customer: CustomerBy,
}

impl Input {
    /// Generates the input of an Order-Status from home warehouse `home`.
    pub fn generate(&mut self, rng: &mut SmallRng, c: &NuRandC, home: u32) {
        self.w_id = home;
        self.d_id = rng.random_range(1..=DISTRICTS);
        self.customer = CustomerBy::generate(rng, c);
    }
}

/// What the terminal displays, summed up.
pub struct Output {
    /// The customer.
    pub c_id: u32,
    /// The customer's balance in cents.
    pub c_balance: i64,
    /// The customer's last order (0 if they have none).
    pub o_id: u32,
    /// Its carrier (0 while undelivered).
    pub o_carrier_id: u64,
    /// Its lines.
    pub lines: u32,
    /// The sum of its lines' amounts, in cents.
    pub amount: i64,
}

/// Runs an Order-Status.
pub fn run<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    input: &Input,
    scratch: &mut Scratch,
) -> TxResult<Output> {
    let (w, d) = (input.w_id, input.d_id);
    let c_id = by::find(tx, t, w, d, input.customer, &mut scratch.matches)?;
    let c_balance = {
        use customer::*;
        let cols = columns(&[C_BALANCE, C_FIRST, C_MIDDLE, C_LAST]);
        tx.get_columns(t.customer, customer_key(w, d, c_id), cols)?
            .ok_or(missing("customer"))?
            .i64(C_BALANCE)
    };
    let mut out = Output {
        c_id,
        c_balance,
        o_id: 0,
        o_carrier_id: 0,
        lines: 0,
        amount: 0,
    };
    // The newest order comes first in the by-customer index.
    let lo = order_customer_key(w, d, c_id, u32::MAX);
    let hi = order_customer_key(w, d, c_id, 0);
    let cols = columns(&[order_customer::O_ID]);
    tx.scan(t.order_customer, lo, hi, 1, cols, |_, row| {
        out.o_id = row.u64(order_customer::O_ID) as u32;
        false
    })?;
    if out.o_id == 0 {
        return Ok(out);
    }
    let ol_cnt = {
        use order::*;
        let cols = columns(&[O_ENTRY_D, O_CARRIER_ID, O_OL_CNT]);
        let row = tx
            .get_columns(t.order, order_key(w, d, out.o_id), cols)?
            .ok_or(missing("order"))?;
        out.o_carrier_id = row.u64(O_CARRIER_ID);
        row.u64(O_OL_CNT) as u32
    };
    use order_line::*;
    let keys = (1..=ol_cnt).map(|ol| order_line_key(w, d, out.o_id, ol));
    tx.prefetch(t.order_line, keys.clone());
    let cols = columns(&[
        OL_I_ID,
        OL_SUPPLY_W_ID,
        OL_QUANTITY,
        OL_AMOUNT,
        OL_DELIVERY_D,
    ]);
    for key in keys {
        let row = tx
            .get_columns(t.order_line, key, cols)?
            .ok_or(missing("order line"))?;
        out.lines += 1;
        out.amount += row.i64(OL_AMOUNT);
    }
    Ok(out)
}
