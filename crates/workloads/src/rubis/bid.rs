//! The bidding transactions: PutBid (the bid form), StoreBid and ViewBidHistory.
//!
//! StoreBid is the Doppel paper's rewritten version (its Figure 7): it inserts the bid and updates
//! the auction metadata with splittable operations only — Max on `max_bid`, OPut on `max_bidder`
//! (order = the bid, so the highest bid's bidder wins), Add on `nb_of_bids` and TopKInsert into the
//! item's top-K set of bids — and reads none of it, so Doppel can run it in a split phase. Of two
//! equal highest bids the one from the higher core id wins, not the first to commit (§7).

use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::input::Request;
use super::schema::*;
use super::user::{authenticate, nickname};
use super::{Scratch, missing};

/// PutBid: after authentication, the item with its current bid and number of bids (what the bid
/// form shows), and the seller's nickname.
pub fn put_bid<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    authenticate(tx, t, r.user)?;
    let cols = columns(&[
        items::NAME,
        items::INITIAL_PRICE,
        items::QUANTITY,
        items::END_DATE,
        items::SELLER,
        items::MAX_BID,
        items::NB_OF_BIDS,
    ]);
    let seller = tx
        .get_columns(t.items, r.item, cols)?
        .ok_or(missing("item"))?
        .u64(items::SELLER);
    nickname(tx, t, seller)
}

/// StoreBid (Figure 7): inserts the bid (and its entry in the by-bidder index) and applies Max, OPut,
/// Add and TopKInsert to the item's auction metadata.
pub fn store_bid<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    let bid = r.new_id;
    tx.insert(t.bids, bid, |w| {
        w.set_u64(bids::USER, r.user);
        w.set_u64(bids::ITEM, r.item);
        w.set_u64(bids::QTY, r.qty);
        w.set_i64(bids::BID, r.amount);
        w.set_i64(bids::MAX_BID, r.max_bid);
        w.set_u64(bids::DATE, r.date);
    })?;
    tx.insert(t.bids_by_user, user_row_key(r.user, bid), |w| {
        w.set_u64(bids_by_user::ITEM, r.item)
    })?;
    let applied = tx.max(t.items, r.item, items::MAX_BID, r.amount)?
        && tx.oput(
            t.items,
            r.item,
            items::MAX_BIDDER,
            r.amount,
            &r.user.to_le_bytes(),
        )?
        && tx.add(t.items, r.item, items::NB_OF_BIDS, 1)?
        && tx.topk_insert(t.items, r.item, items::BIDS, r.amount, &bid.to_le_bytes())?;
    if !applied {
        return Err(missing("item"));
    }
    Ok(())
}

/// ViewBidHistory: the item's name and its highest bids (from the per-item top-K set), each with the
/// bidder's nickname. Returns the number of bids shown.
pub fn view_bid_history<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    s: &mut Scratch,
) -> TxResult<usize> {
    let row = tx
        .get_columns(t.items, r.item, columns(&[items::NAME, items::BIDS]))?
        .ok_or(missing("item"))?;
    s.ids.clear();
    s.ids.extend(row.topk(items::BIDS).map(|e| id_of(e.value)));
    let cols = columns(&[bids::USER, bids::BID, bids::QTY, bids::DATE]);
    for &bid in &s.ids {
        let bidder = tx
            .get_columns(t.bids, bid, cols)?
            .ok_or(missing("bid"))?
            .u64(bids::USER);
        nickname(tx, t, bidder)?;
    }
    Ok(s.ids.len())
}
