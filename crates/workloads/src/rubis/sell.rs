//! The selling transactions: SelectCategoryToSellItem and StoreItem (RUBiS's RegisterItem), which
//! Doppel's port extends to insert the new item into the top-K sets of newest items of its category
//! and of its seller's region with TopKInsert.

use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::browse::names;
use super::input::Request;
use super::missing;
use super::schema::*;
use super::user::authenticate;

/// Auction length of items put on sale, in microseconds (RUBiS lets sellers pick up to 7 days).
pub const DURATION: u64 = 7 * 24 * 3600 * 1_000_000;
/// The description of generated items.
pub const DESCRIPTION: &[u8] = b"This incredible item is exactly what you need!";

/// SelectCategoryToSellItem: after authentication, every category's name.
pub fn select_category_to_sell_item<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    categories: u64,
) -> TxResult<usize> {
    authenticate(tx, t, r.user)?;
    names(tx, t.categories, categories)
}

/// StoreItem: inserts the item (and its entry in the by-seller index) and TopKInserts it, ordered
/// by id, into its category's and its seller's region's sets of newest items.
pub fn store_item<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    let region = tx
        .get_columns(t.users, r.user, columns(&[users::REGION]))?
        .ok_or(missing("user"))?
        .u64(users::REGION);
    let id = r.new_id;
    let mut name = [0u8; 64];
    let len = format_into(
        &mut name,
        format_args!("RUBiS automatically generated item #{id}"),
    );
    tx.insert(t.items, id, |w| {
        w.set_bytes(items::NAME, &name[..len]);
        w.set_bytes(items::DESCRIPTION, DESCRIPTION);
        w.set_i64(items::INITIAL_PRICE, r.amount);
        w.set_i64(items::RESERVE_PRICE, r.amount + r.amount / 2);
        w.set_i64(items::BUY_NOW, 2 * r.amount);
        w.set_u64(items::START_DATE, r.date);
        w.set_u64(items::SELLER, r.user);
        w.set_u64(items::CATEGORY, r.category);
        w.set_u64(items::QUANTITY, r.qty);
        w.set_u64(items::END_DATE, r.date + DURATION);
    })?;
    tx.insert(t.items_by_seller, item_seller_key(r.user, id), |w| {
        w.set_u64(items_by_seller::ITEM, id)
    })?;
    let order = id as i64;
    let bytes = id.to_le_bytes();
    let listed = tx.topk_insert(t.categories, r.category, named::NEW_ITEMS, order, &bytes)?
        && tx.topk_insert(t.regions, region, named::NEW_ITEMS, order, &bytes)?;
    if !listed {
        return Err(missing("category or region"));
    }
    Ok(())
}
