//! The buy-now transactions: BuyNow (the purchase form) and StoreBuyNow.

use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::input::Request;
use super::missing;
use super::schema::*;
use super::user::{authenticate, nickname};

/// BuyNow: after authentication, the item's name, buy-now price and quantity left, and the
/// seller's nickname.
pub fn buy_now<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    authenticate(tx, t, r.user)?;
    let cols = columns(&[
        items::NAME,
        items::BUY_NOW,
        items::QUANTITY,
        items::END_DATE,
        items::SELLER,
    ]);
    let seller = tx
        .get_columns(t.items, r.item, cols)?
        .ok_or(missing("item"))?
        .u64(items::SELLER);
    nickname(tx, t, seller)
}

/// StoreBuyNow: takes the quantity bought off the item (ending the auction when none is left) and
/// records the purchase. Buying more than is left rolls back as a user abort, the error page RUBiS
/// shows.
pub fn store_buy_now<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    let left = tx
        .get_columns(t.items, r.item, columns(&[items::QUANTITY]))?
        .ok_or(missing("item"))?
        .u64(items::QUANTITY);
    if r.qty > left {
        return Err(tx.abort());
    }
    let left = left - r.qty;
    tx.update(t.items, r.item, |w| {
        w.set_u64(items::QUANTITY, left);
        if left == 0 {
            w.set_u64(items::END_DATE, r.date);
        }
    })?;
    tx.insert(t.buy_now, user_row_key(r.user, r.new_id), |w| {
        w.set_u64(buy_now::ITEM, r.item);
        w.set_u64(buy_now::QTY, r.qty);
        w.set_u64(buy_now::DATE, r.date);
    })
}
