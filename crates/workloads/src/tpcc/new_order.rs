//! The New-Order transaction (clause 2.4): enters an order of 5-15 lines, updating the stock of
//! each item; 1% of orders name an unused item and roll back.

use phasedb_storage::TableId;
use phasedb_txn::{Conflict, Protocol, RowWriter, Tx, TxError, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use super::random::{NuRandC, customer_id, is_original, item_id, now_micros};
use super::schema::*;
use super::{TpccConfig, missing, other_warehouse};

/// One order line's input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
}

/// The terminal input of a New-Order (clause 2.4.1): a plain value, drawn by [`Input::generate`]
/// (or [`Input::generate_partitioned`]) and run by [`run`], which a partitioned deployment sends
/// over the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    /// The lines used, `lines[..ol_cnt]`; a decoded input has at most [`MAX_OL_CNT`].
    #[serde(deserialize_with = "super::serde_at_most::<_, MAX_OL_CNT>")]
    pub ol_cnt: usize,
    pub lines: [Line; MAX_OL_CNT],
    pub all_local: bool,
    pub entry_d: u64,
}

impl Input {
    /// Generates the input of a New-Order from home warehouse `home`: each line is supplied by
    /// another warehouse with probability `cfg.remote_item_ratio` (clause 2.4.1.5).
    pub fn generate(&mut self, rng: &mut SmallRng, cfg: &TpccConfig, c: &NuRandC, home: u32) {
        let remote = cfg.warehouses > 1;
        self.draw(rng, c, home, |rng| {
            if remote && rng.random_bool(cfg.remote_item_ratio) {
                other_warehouse(rng, home, cfg.warehouses)
            } else {
                home
            }
        });
    }

    /// Generates the input of a New-Order from home warehouse `home` for a partitioned deployment:
    /// every line is supplied by `home`, except, when `remote` names another warehouse, one line
    /// chosen uniformly, which it supplies (as nearly every remote New-Order of the specification's
    /// 1% per line has exactly one remote line).
    pub fn generate_partitioned(
        &mut self,
        rng: &mut SmallRng,
        c: &NuRandC,
        home: u32,
        remote: Option<u32>,
    ) {
        self.draw(rng, c, home, |_| home);
        if let Some(w) = remote {
            let n = rng.random_range(0..self.ol_cnt);
            self.lines[n].supply_w_id = w;
            self.all_local = w == home;
        }
    }

    /// Draws the terminal input (clause 2.4.1) with each line's supply warehouse from `supply`; 1%
    /// of orders end with an unused item.
    #[inline]
    fn draw(
        &mut self,
        rng: &mut SmallRng,
        c: &NuRandC,
        home: u32,
        mut supply: impl FnMut(&mut SmallRng) -> u32,
    ) {
        self.w_id = home;
        self.d_id = rng.random_range(1..=DISTRICTS);
        self.c_id = customer_id(rng, c);
        self.ol_cnt = rng.random_range(5..=MAX_OL_CNT);
        let rollback = rng.random_range(1..=100) == 1;
        self.all_local = true;
        for (n, line) in self.lines[..self.ol_cnt].iter_mut().enumerate() {
            line.i_id = if rollback && n == self.ol_cnt - 1 {
                ITEMS + 1
            } else {
                item_id(rng, c)
            };
            line.supply_w_id = supply(rng);
            self.all_local &= line.supply_w_id == home;
            line.quantity = rng.random_range(1..=10);
        }
        self.entry_d = now_micros();
    }
}

/// What the terminal displays, summed up.
pub struct Output {
    pub o_id: u32,
    /// Total amount in cents, after discount and taxes.
    pub total_amount: f64,
    /// Lines whose item and stock both carry "ORIGINAL" (brand-generic "B").
    pub brand_lines: u32,
}

/// The item columns a New-Order reads.
const ITEM_COLUMNS: u64 = 1 << item::I_PRICE | 1 << item::I_NAME | 1 << item::I_DATA;

/// The customer columns a New-Order reads.
const CUSTOMER_COLUMNS: u64 =
    1 << customer::C_DISCOUNT | 1 << customer::C_LAST | 1 << customer::C_CREDIT;

/// The stock columns a New-Order of district `d` reads.
fn stock_columns(d: u32) -> u64 {
    use stock::*;
    columns(&[S_QUANTITY, S_YTD, S_ORDER_CNT, S_REMOTE_CNT, S_DATA])
        | 1 << (S_DIST_01 + d as usize - 1)
}

/// Runs a New-Order; an unused item id aborts it by the procedure's choice (a user abort).
pub fn run<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, input: &Input) -> TxResult<Output> {
    let (w, d) = (input.w_id, input.d_id);
    let lines = &input.lines[..input.ol_cnt];
    let items = lines.iter().map(|l| item_key(l.i_id));
    let stocks = lines.iter().map(|l| stock_key(l.supply_w_id, l.i_id));
    let customer = std::iter::once(customer_key(w, d, input.c_id));
    // Index slots of every table first, then the records, so that the slots are on their way by
    // the time the record pass looks them up.
    tx.prefetch_index(t.item, items.clone());
    tx.prefetch_index(t.stock, stocks.clone());
    tx.prefetch_index(t.customer, customer.clone());
    tx.prefetch_columns(t.item, items, ITEM_COLUMNS);
    tx.prefetch_columns(t.stock, stocks, stock_columns(d));
    tx.prefetch_columns(t.customer, customer, CUSTOMER_COLUMNS);
    let w_tax = {
        use warehouse::*;
        tx.get_columns(t.warehouse, warehouse_key(w), columns(&[W_TAX]))?
            .ok_or(missing("warehouse"))?
            .i64(W_TAX)
    };
    let (d_tax, o_id) = {
        use district::*;
        let key = district_key(w, d);
        let row = tx
            .get_columns(t.district, key, columns(&[D_TAX, D_NEXT_O_ID]))?
            .ok_or(missing("district"))?;
        let (d_tax, o_id) = (row.i64(D_TAX), row.u64(D_NEXT_O_ID));
        tx.update(t.district, key, |r| r.set_u64(D_NEXT_O_ID, o_id + 1))?;
        (d_tax, o_id as u32)
    };
    // Where the new rows go in the indexes is cold: start loading it all at once (there are no
    // records to load yet).
    tx.prefetch_insert(t.order, std::iter::once(order_key(w, d, o_id)));
    tx.prefetch_insert(t.new_order, std::iter::once(order_key(w, d, o_id)));
    tx.prefetch_insert(
        t.order_customer,
        std::iter::once(order_customer_key(w, d, input.c_id, o_id)),
    );
    tx.prefetch_insert(
        t.order_line,
        (1..=lines.len() as u32).map(|n| order_line_key(w, d, o_id, n)),
    );
    let c_discount = {
        use customer::*;
        let row = tx
            .get_columns(t.customer, customer_key(w, d, input.c_id), CUSTOMER_COLUMNS)?
            .ok_or(missing("customer"))?;
        row.i64(C_DISCOUNT)
    };
    {
        use order::*;
        insert_new(tx, t.order, order_key(w, d, o_id), |r| {
            r.set_u64(O_C_ID, input.c_id as u64);
            r.set_u64(O_ENTRY_D, input.entry_d);
            r.set_u64(O_CARRIER_ID, 0);
            r.set_u64(O_OL_CNT, input.ol_cnt as u64);
            r.set_u64(O_ALL_LOCAL, input.all_local as u64);
        })?;
    }
    insert_new(tx, t.new_order, order_key(w, d, o_id), |r| {
        r.set_u64(new_order::NO_O_ID, o_id as u64)
    })?;
    insert_new(
        tx,
        t.order_customer,
        order_customer_key(w, d, input.c_id, o_id),
        |r| r.set_u64(order_customer::O_ID, o_id as u64),
    )?;
    let mut total = 0i64;
    let mut brand_lines = 0;
    for (n, line) in lines.iter().enumerate() {
        let (i_price, i_original) = {
            use item::*;
            match tx.get_columns(t.item, item_key(line.i_id), ITEM_COLUMNS)? {
                Some(row) => (row.i64(I_PRICE), is_original(row.bytes(I_DATA))),
                // "Item number is not valid": the whole order rolls back.
                None => return Err(tx.abort()),
            }
        };
        let dist_info = {
            use stock::*;
            let key = stock_key(line.supply_w_id, line.i_id);
            let s_dist = S_DIST_01 + d as usize - 1;
            let row = tx
                .get_columns(t.stock, key, stock_columns(d))?
                .ok_or(missing("stock"))?;
            let quantity = row.u64(S_QUANTITY);
            let (ytd, order_cnt, remote_cnt) =
                (row.u64(S_YTD), row.u64(S_ORDER_CNT), row.u64(S_REMOTE_CNT));
            let mut dist_info = [0u8; 24];
            dist_info.copy_from_slice(row.bytes(s_dist));
            if i_original && is_original(row.bytes(S_DATA)) {
                brand_lines += 1;
            }
            let ordered = line.quantity as u64;
            let remote = line.supply_w_id != w;
            tx.update(t.stock, key, |r| {
                r.set_u64(
                    S_QUANTITY,
                    if quantity >= ordered + 10 {
                        quantity - ordered
                    } else {
                        quantity + 91 - ordered
                    },
                );
                r.set_u64(S_YTD, ytd + ordered);
                r.set_u64(S_ORDER_CNT, order_cnt + 1);
                r.set_u64(S_REMOTE_CNT, remote_cnt + remote as u64);
            })?;
            dist_info
        };
        let amount = line.quantity as i64 * i_price;
        total += amount;
        use order_line::*;
        let key = order_line_key(w, d, o_id, n as u32 + 1);
        insert_new(tx, t.order_line, key, |r| {
            r.set_u64(OL_I_ID, line.i_id as u64);
            r.set_u64(OL_SUPPLY_W_ID, line.supply_w_id as u64);
            r.set_u64(OL_DELIVERY_D, 0);
            r.set_u64(OL_QUANTITY, line.quantity as u64);
            r.set_i64(OL_AMOUNT, amount);
            r.set_bytes(OL_DIST_INFO, &dist_info);
        })?;
    }
    let total_amount =
        total as f64 * (1.0 - c_discount as f64 / 1e4) * (1.0 + (w_tax + d_tax) as f64 / 1e4);
    Ok(Output {
        o_id,
        total_amount,
        brand_lines,
    })
}

/// Inserts a row of the new order. The keys derive from the `D_NEXT_O_ID` read, so finding one taken
/// means that read is stale: a concurrent NewOrder of the district committed the same order id. That
/// is a conflict to retry, but the engine reports it as [`TxError::DuplicateKey`], which it does not
/// retry (it does not check whether the read set still validates), so the error is turned into a
/// validation conflict here.
fn insert_new<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    table: TableId,
    key: u64,
    fill: impl FnOnce(&mut RowWriter<'_>),
) -> TxResult<()> {
    match tx.insert(table, key, fill) {
        Err(TxError::DuplicateKey { .. }) => Err(TxError::Conflict(Conflict::Validation)),
        r => r,
    }
}
