//! The Delivery transaction (clause 2.7): delivers the oldest undelivered order of each of the ten
//! districts of a warehouse, run here as one transaction rather than deferred.
//!
//! Each district's scan for its oldest new-order row starts at a hint, the order after the last one
//! delivered (as Silo's TPC-C does): new orders only ever get higher ids, so nothing below it can
//! exist, and the scan skips the rows deleted by earlier deliveries, which stay linked as tombstones
//! until no transaction that could have seen them runs (and would each cost a read).

use phasedb_txn::{Protocol, Tx, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;

use super::missing;
use super::random::now_micros;
use super::schema::*;

/// The terminal input of a Delivery (clause 2.7.1).
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The warehouse (the home warehouse).
    pub w_id: u32,
    /// `O_CARRIER_ID`, 1..=10.
    pub carrier_id: u64,
    /// `OL_DELIVERY_D`.
    pub delivery_d: u64,
    /// Per district (index `D_ID - 1`), an order id no undelivered order is below (0: scan all).
    pub first_o_id: [u32; DISTRICTS as usize],
}

/// What the terminal would log, per district.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    /// The order delivered in each district (index `D_ID - 1`), 0 if the district had none.
    pub o_ids: [u32; DISTRICTS as usize],
}

impl Input {
    /// Generates the input of a Delivery from home warehouse `home`.
    /// `first_o_id` comes from the caller's hints.
    pub fn generate(&mut self, rng: &mut SmallRng, home: u32) {
        self.w_id = home;
        self.carrier_id = rng.random_range(1..=10);
        self.delivery_d = now_micros();
    }
}

/// The customer columns a Delivery reads and updates.
const CUSTOMER_COLUMNS: u64 = 1 << customer::C_BALANCE | 1 << customer::C_DELIVERY_CNT;

/// Runs a Delivery.
pub fn run<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, input: &Input) -> TxResult<Output> {
    let w = input.w_id;
    let mut out = Output::default();
    for d in 1..=DISTRICTS {
        // The oldest new-order row of the district.
        let mut found = None;
        let first = input.first_o_id[d as usize - 1];
        let (lo, hi) = (order_key(w, d, first), order_key(w, d, u32::MAX));
        let cols = columns(&[new_order::NO_O_ID]);
        tx.scan(t.new_order, lo, hi, 1, cols, |key, row| {
            found = Some((key, row.u64(new_order::NO_O_ID) as u32));
            false
        })?;
        // None: the district has no undelivered order; it is skipped.
        let Some((no_key, o_id)) = found else {
            continue;
        };
        tx.delete(t.new_order, no_key)?;
        let (c_id, ol_cnt) = {
            use order::*;
            let key = order_key(w, d, o_id);
            let row = tx
                .get_columns(t.order, key, columns(&[O_C_ID, O_OL_CNT]))?
                .ok_or(missing("order"))?;
            let (c_id, ol_cnt) = (row.u64(O_C_ID) as u32, row.u64(O_OL_CNT) as u32);
            tx.update(t.order, key, |r| r.set_u64(O_CARRIER_ID, input.carrier_id))?;
            (c_id, ol_cnt)
        };
        // The lines and the customer are cold: start loading them all at once.
        let lines = (1..=ol_cnt).map(|ol| order_line_key(w, d, o_id, ol));
        let customer = std::iter::once(customer_key(w, d, c_id));
        tx.prefetch_index(t.customer, customer.clone());
        tx.prefetch(t.order_line, lines);
        tx.prefetch_columns(t.customer, customer, CUSTOMER_COLUMNS);
        let mut amount = 0;
        for ol in 1..=ol_cnt {
            use order_line::*;
            let key = order_line_key(w, d, o_id, ol);
            amount += tx
                .get_columns(t.order_line, key, columns(&[OL_AMOUNT]))?
                .ok_or(missing("order line"))?
                .i64(OL_AMOUNT);
            tx.update(t.order_line, key, |r| {
                r.set_u64(OL_DELIVERY_D, input.delivery_d)
            })?;
        }
        {
            use customer::*;
            let key = customer_key(w, d, c_id);
            let row = tx
                .get_columns(t.customer, key, CUSTOMER_COLUMNS)?
                .ok_or(missing("customer"))?;
            let (balance, count) = (row.i64(C_BALANCE), row.u64(C_DELIVERY_CNT));
            tx.update(t.customer, key, |r| {
                r.set_i64(C_BALANCE, balance + amount);
                r.set_u64(C_DELIVERY_CNT, count + 1);
            })?;
        }
        out.o_ids[d as usize - 1] = o_id;
    }
    Ok(out)
}
