//! The Stock-Level transaction (clause 2.8): counts the distinct items of a district's last 20
//! orders whose stock is below a threshold.

use phasedb_txn::{Protocol, Tx, TxResult, columns};
use rand::RngExt;
use rand::rngs::SmallRng;

use super::schema::*;
use super::{Scratch, missing};

/// The terminal input of a Stock-Level (clause 2.8.1).
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The warehouse (the home warehouse).
    pub w_id: u32,
    /// The district.
    pub d_id: u32,
    /// The stock threshold, 10..=20.
    pub threshold: u64,
}

impl Input {
    /// Generates the input of a Stock-Level from home warehouse `home`.
    pub fn generate(&mut self, rng: &mut SmallRng, home: u32) {
        self.w_id = home;
        self.d_id = rng.random_range(1..=DISTRICTS);
        self.threshold = rng.random_range(10..=20);
    }
}

/// Runs a Stock-Level; returns the number of distinct low-stock items.
pub fn run<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    input: &Input,
    scratch: &mut Scratch,
) -> TxResult<u32> {
    let (w, d) = (input.w_id, input.d_id);
    let next_o_id = {
        use district::*;
        tx.get_columns(t.district, district_key(w, d), columns(&[D_NEXT_O_ID]))?
            .ok_or(missing("district"))?
            .u64(D_NEXT_O_ID) as u32
    };
    let items = &mut scratch.items;
    items.clear();
    // The lines of the district's last 20 orders: each order's line count, then its lines by key.
    let orders = next_o_id.saturating_sub(20).max(1)..next_o_id;
    let (count_col, item_col) = (columns(&[order::O_OL_CNT]), columns(&[order_line::OL_I_ID]));
    tx.prefetch_columns(
        t.order,
        orders.clone().map(|o| order_key(w, d, o)),
        count_col,
    );
    for o in orders {
        let ol_cnt = tx
            .get_columns(t.order, order_key(w, d, o), count_col)?
            .ok_or(missing("order"))?
            .u64(order::O_OL_CNT) as u32;
        let keys = (1..=ol_cnt).map(|ol| order_line_key(w, d, o, ol));
        tx.prefetch_columns(t.order_line, keys.clone(), item_col);
        for key in keys {
            let row = tx
                .get_columns(t.order_line, key, item_col)?
                .ok_or(missing("order line"))?;
            items.push(row.u64(order_line::OL_I_ID) as u32);
        }
    }
    items.sort_unstable();
    items.dedup();
    // Only `S_QUANTITY` is read: prefetching whole stock rows would load six times the lines.
    let quantity_col = columns(&[stock::S_QUANTITY]);
    tx.prefetch_columns(
        t.stock,
        items.iter().map(|&i| stock_key(w, i)),
        quantity_col,
    );
    let mut low = 0;
    for &i in items.iter() {
        use stock::*;
        let quantity = tx
            .get_columns(t.stock, stock_key(w, i), quantity_col)?
            .ok_or(missing("stock"))?
            .u64(S_QUANTITY);
        low += (quantity < input.threshold) as u32;
    }
    Ok(low)
}
