//! The browsing transactions: BrowseCategories (also BrowseCategoriesInRegion), BrowseRegions,
//! SearchItemsByCategory, SearchItemsByRegion and ViewItem. The searches read the per-category and
//! per-region top-K sets of newest items that StoreItem maintains, then the items listed.

use phasedb_storage::TableId;
use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::input::Request;
use super::schema::*;
use super::user::nickname;
use super::{Scratch, missing};

/// The columns a search page shows of an item: name, initial price, current bid, number of bids,
/// end date.
fn listed_columns() -> u64 {
    columns(&[
        items::NAME,
        items::INITIAL_PRICE,
        items::MAX_BID,
        items::NB_OF_BIDS,
        items::END_DATE,
    ])
}

/// Reads the names of rows `1..=n` of a categories or regions table; returns `n`.
pub fn names<P: Protocol>(tx: &mut Tx<'_, '_, P>, table: TableId, n: u64) -> TxResult<usize> {
    for key in 1..=n {
        tx.get_columns(table, key, columns(&[named::NAME]))?
            .ok_or(missing("category or region"))?;
    }
    Ok(n as usize)
}

/// BrowseCategories: every category's name, and the region's name when browsing within one.
pub fn browse_categories<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    categories: u64,
) -> TxResult<usize> {
    if r.region != 0 {
        tx.get_columns(t.regions, r.region, columns(&[named::NAME]))?
            .ok_or(missing("region"))?;
    }
    names(tx, t.categories, categories)
}

/// Copies the item ids of the top-K set of newest items of row `key` of `table` into `ids`.
fn newest_items<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    table: TableId,
    key: u64,
    ids: &mut Vec<u64>,
) -> TxResult<()> {
    let row = tx
        .get_columns(table, key, columns(&[named::NEW_ITEMS]))?
        .ok_or(missing("category or region"))?;
    ids.clear();
    ids.extend(row.topk(named::NEW_ITEMS).map(|e| id_of(e.value)));
    Ok(())
}

/// SearchItemsByCategory: the newest items of the category still on auction, with their current
/// bids. Returns the number of items shown.
pub fn search_items_by_category<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    s: &mut Scratch,
) -> TxResult<usize> {
    newest_items(tx, t.categories, r.category, &mut s.ids)?;
    let mut shown = 0;
    for &item in &s.ids {
        let row = tx
            .get_columns(t.items, item, listed_columns())?
            .ok_or(missing("item"))?;
        shown += (row.u64(items::END_DATE) >= r.date) as usize;
    }
    Ok(shown)
}

/// SearchItemsByRegion: the newest items sold by users of the region, those of the category still
/// on auction shown with their current bids. Returns the number of items shown.
pub fn search_items_by_region<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    s: &mut Scratch,
) -> TxResult<usize> {
    newest_items(tx, t.regions, r.region, &mut s.ids)?;
    let mut shown = 0;
    for &item in &s.ids {
        let row = tx
            .get_columns(t.items, item, columns(&[items::CATEGORY, items::END_DATE]))?
            .ok_or(missing("item"))?;
        if row.u64(items::CATEGORY) == r.category && row.u64(items::END_DATE) >= r.date {
            tx.get_columns(t.items, item, listed_columns())?
                .ok_or(missing("item"))?;
            shown += 1;
        }
    }
    Ok(shown)
}

/// ViewItem: every field of the item with its current bid and number of bids, and the seller's
/// nickname. Returns the number of bids.
pub fn view_item<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<i64> {
    // The bids top-K set is the last column; ViewBidHistory shows it, not ViewItem.
    let all_but_bids = (1u64 << items::BIDS) - 1;
    let row = tx
        .get_columns(t.items, r.item, all_but_bids)?
        .ok_or(missing("item"))?;
    let (seller, bids) = (row.u64(items::SELLER), row.i64(items::NB_OF_BIDS));
    nickname(tx, t, seller)?;
    Ok(bids)
}
