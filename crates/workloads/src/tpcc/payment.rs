//! The Payment transaction (clause 2.5): a customer pays an amount to a district of a warehouse,
//! which updates the year-to-date totals, the customer's balance (and, for bad credit, its data) and
//! adds a history row.

use std::io::Write;

use phasedb_txn::{Protocol, SplitOp, Tx, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use super::customer::{self as by, CustomerBy};
use super::random::{NuRandC, now_micros};
use super::schema::*;
use super::{Scratch, TpccConfig, missing, other_warehouse};

/// The terminal input of a Payment (clause 2.5.1): a plain value, drawn by [`Input::generate`] (or
/// [`Input::generate_partitioned`]) and run by [`run`], which a partitioned deployment sends over
/// the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// The warehouse and district paid to.
    pub w_id: u32,
    /// The district paid to.
    pub d_id: u32,
    /// The customer's warehouse (another one for a remote payment).
    pub c_w_id: u32,
    /// The customer's district.
    pub c_d_id: u32,
    /// The customer, by id or last name.
    pub customer: CustomerBy,
    /// `H_AMOUNT` in cents (1.00 to 5,000.00).
    pub amount: i64,
    /// `H_DATE`.
    pub date: u64,
    /// Key of the history row to insert (unique per generated payment; see [`history_key`]).
    pub history_key: u64,
}

impl Input {
    /// Generates the input of a Payment from home warehouse `home`: with probability
    /// `cfg.remote_payment_ratio` the customer is of another warehouse (clause 2.5.1.2).
    pub fn generate(
        &mut self,
        rng: &mut SmallRng,
        cfg: &TpccConfig,
        c: &NuRandC,
        home: u32,
        history_key: u64,
    ) {
        self.draw(rng, c, home, history_key, |rng| {
            // With one warehouse, "remote" can only mean another district of it.
            rng.random_bool(cfg.remote_payment_ratio)
                .then(|| other_warehouse(rng, home, cfg.warehouses))
        });
    }

    /// Generates the input of a Payment from home warehouse `home` for a partitioned deployment:
    /// the customer is of warehouse `remote` (any of its districts) when given, else of the
    /// district paid to.
    pub fn generate_partitioned(
        &mut self,
        rng: &mut SmallRng,
        c: &NuRandC,
        home: u32,
        remote: Option<u32>,
        history_key: u64,
    ) {
        self.draw(rng, c, home, history_key, |_| remote);
    }

    /// Draws the terminal input (clause 2.5.1); `remote` says whether the customer is remote, and
    /// of which warehouse.
    #[inline]
    fn draw(
        &mut self,
        rng: &mut SmallRng,
        c: &NuRandC,
        home: u32,
        history_key: u64,
        remote: impl FnOnce(&mut SmallRng) -> Option<u32>,
    ) {
        self.w_id = home;
        self.d_id = rng.random_range(1..=DISTRICTS);
        if let Some(w) = remote(rng) {
            self.c_w_id = w;
            self.c_d_id = rng.random_range(1..=DISTRICTS);
        } else {
            self.c_w_id = home;
            self.c_d_id = self.d_id;
        }
        self.customer = CustomerBy::generate(rng, c);
        self.amount = rng.random_range(100..=500_000);
        self.date = now_micros();
        self.history_key = history_key;
    }
}

/// What the terminal displays, summed up.
pub struct Output {
    /// The customer who paid.
    pub c_id: u32,
    /// The customer's balance after the payment, in cents.
    pub c_balance: i64,
    /// Whether the customer has bad credit (and had `C_DATA` updated).
    pub bad_credit: bool,
}

/// The customer columns a Payment reads (and `C_DATA` for a customer with bad credit).
const CUSTOMER_COLUMNS: u64 = {
    use customer::*;
    1 << C_FIRST
        | 1 << C_MIDDLE
        | 1 << C_LAST
        | 1 << C_STREET_1
        | 1 << C_STREET_2
        | 1 << C_CITY
        | 1 << C_STATE
        | 1 << C_ZIP
        | 1 << C_PHONE
        | 1 << C_SINCE
        | 1 << C_CREDIT
        | 1 << C_CREDIT_LIM
        | 1 << C_DISCOUNT
        | 1 << C_BALANCE
        | 1 << C_YTD_PAYMENT
        | 1 << C_PAYMENT_CNT
};

/// Runs a Payment.
pub fn run<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    input: &Input,
    scratch: &mut Scratch,
) -> TxResult<Output> {
    let (w, d) = (input.w_id, input.d_id);
    let amount = input.amount;
    // Where the history row goes is cold and known from the start.
    tx.prefetch_insert(t.history, std::iter::once(input.history_key));
    if let by::CustomerBy::Id(c) = input.customer {
        let key = customer_key(input.c_w_id, input.c_d_id, c);
        tx.prefetch_columns(t.customer, std::iter::once(key), CUSTOMER_COLUMNS);
    }
    // H_DATA = W_NAME, four spaces, D_NAME.
    let mut h_data = [b' '; 24];
    // The year-to-date totals are not displayed: commutative updates, so that concurrent payments
    // to a warehouse or district do not conflict on them. Each comes before the row's read, so
    // that under locking the row (one group when coarse) is locked for writing at once rather
    // than read-locked and then upgraded, which two payments would deadlock on.
    let w_name_len = {
        use warehouse::*;
        let key = warehouse_key(w);
        tx.commute(t.warehouse, key, W_YTD, SplitOp::Add(amount))?;
        let cols = columns(&[W_NAME, W_STREET_1, W_STREET_2, W_CITY, W_STATE, W_ZIP]);
        let row = tx
            .get_columns(t.warehouse, key, cols)?
            .ok_or(missing("warehouse"))?;
        let name = row.bytes(W_NAME);
        h_data[..name.len()].copy_from_slice(name);
        name.len()
    };
    let h_data_len = {
        use district::*;
        let key = district_key(w, d);
        tx.commute(t.district, key, D_YTD, SplitOp::Add(amount))?;
        let cols = columns(&[D_NAME, D_STREET_1, D_STREET_2, D_CITY, D_STATE, D_ZIP]);
        let row = tx
            .get_columns(t.district, key, cols)?
            .ok_or(missing("district"))?;
        let name = row.bytes(D_NAME);
        let at = w_name_len + 4;
        h_data[at..at + name.len()].copy_from_slice(name);
        at + name.len()
    };
    let (c_w, c_d) = (input.c_w_id, input.c_d_id);
    let c_id = by::find(tx, t, c_w, c_d, input.customer, &mut scratch.matches)?;
    let (c_balance, bad_credit) = {
        use customer::*;
        let key = customer_key(c_w, c_d, c_id);
        let row = tx
            .get_columns(t.customer, key, CUSTOMER_COLUMNS)?
            .ok_or(missing("customer"))?;
        let bad_credit = row.bytes(C_CREDIT) == b"BC";
        let balance = row.i64(C_BALANCE) - amount;
        let ytd_payment = row.i64(C_YTD_PAYMENT) + amount;
        let payment_cnt = row.u64(C_PAYMENT_CNT) + 1;
        let data_len = if bad_credit {
            let old = tx
                .get_columns(t.customer, key, columns(&[C_DATA]))?
                .ok_or(missing("customer"))?
                .bytes(C_DATA);
            bad_credit_data(&mut scratch.data, old, [c_id, c_d, c_w, d, w], amount)
        } else {
            0
        };
        let data = &scratch.data[..data_len];
        tx.update(t.customer, key, |r| {
            r.set_i64(C_BALANCE, balance);
            r.set_i64(C_YTD_PAYMENT, ytd_payment);
            r.set_u64(C_PAYMENT_CNT, payment_cnt);
            if bad_credit {
                r.set_bytes(C_DATA, data);
            }
        })?;
        (balance, bad_credit)
    };
    {
        use history::*;
        tx.insert(t.history, input.history_key, |r| {
            r.set_u64(H_C_ID, c_id as u64);
            r.set_u64(H_C_D_ID, c_d as u64);
            r.set_u64(H_C_W_ID, c_w as u64);
            r.set_u64(H_D_ID, d as u64);
            r.set_u64(H_W_ID, w as u64);
            r.set_u64(H_DATE, input.date);
            r.set_i64(H_AMOUNT, amount);
            r.set_bytes(H_DATA, &h_data[..h_data_len]);
        })?;
    }
    Ok(Output {
        c_id,
        c_balance,
        bad_credit,
    })
}

/// Builds a bad-credit customer's new `C_DATA` in `out`: C_ID, C_D_ID, C_W_ID, D_ID, W_ID and H_AMOUNT
/// followed by the old data, cut to 500 characters (clause 2.5.2.2). Returns the length.
fn bad_credit_data(out: &mut [u8; 500], old: &[u8], ids: [u32; 5], amount: i64) -> usize {
    let mut cursor = &mut out[..];
    let [c, cd, cw, d, w] = ids;
    // Writing to a slice cannot fail while it has room, and this prefix is under 60 bytes.
    let _ = write!(
        cursor,
        "{c} {cd} {cw} {d} {w} {}.{:02} ",
        amount / 100,
        amount % 100
    );
    let prefix = 500 - cursor.len();
    let keep = old.len().min(cursor.len());
    out[prefix..prefix + keep].copy_from_slice(&old[..keep]);
    prefix + keep
}
