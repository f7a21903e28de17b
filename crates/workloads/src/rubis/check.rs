//! RUBiS's consistency conditions after a run, read without transactions while nothing runs:
//!
//! 1. every item's `nb_of_bids` is the number of its bids, `max_bid` the largest of them, and
//!    `max_bidder` an ordered tuple whose order is `max_bid` and whose bytes name a user who bid it;
//! 2. every item's top-K set of bids holds its K highest distinct bid amounts, each naming one of
//!    its bids of that amount;
//! 3. every user's rating is the sum of the ratings of the comments about them;
//! 4. every category's and region's top-K set of newest items holds the K largest ids among the
//!    items of that category, or sold by users of that region;
//! 5. the indexes agree with their tables (nicknames, bids by bidder, items by seller), and every
//!    loaded item's quantity is its quantity at load less what was bought of it.

use std::collections::{HashMap, HashSet};

use phasedb_storage::TableId;
use phasedb_txn::{Database, Protocol};

use super::load::Loaded;
use super::schema::*;

/// A bid as the check sees it.
struct Bid {
    id: u64,
    user: u64,
    amount: i64,
}

/// Checks every condition; the first failure names the condition and the row.
pub fn check<P: Protocol>(db: &Database<P>, t: &Tables, loaded: &Loaded) -> Result<(), String> {
    let bids = bids_per_item(db, t)?;
    auctions(db, t, &bids)?;
    ratings(db, t)?;
    newest_items(db, t)?;
    indexes(db, t)?;
    quantities(db, t, loaded)
}

/// Reads every bid, grouped by item.
fn bids_per_item<P: Protocol>(
    db: &Database<P>,
    t: &Tables,
) -> Result<HashMap<u64, Vec<Bid>>, String> {
    let mut per_item: HashMap<u64, Vec<Bid>> = HashMap::new();
    db.for_each_row_quiescent(t.bids, |id, row| {
        per_item.entry(row.u64(bids::ITEM)).or_default().push(Bid {
            id,
            user: row.u64(bids::USER),
            amount: row.i64(bids::BID),
        });
    });
    // Hot items hold most bids: look a bid up by id instead of scanning its item's bids.
    for bids in per_item.values_mut() {
        bids.sort_unstable_by_key(|b| b.id);
    }
    let mut by_user = 0;
    let mut wrong = None;
    db.for_each_row_quiescent(t.bids_by_user, |key, row| {
        by_user += 1;
        let (user, bid, item) = (
            user_of_user_key(key),
            row_of_user_key(key),
            row.u64(bids_by_user::ITEM),
        );
        let found = per_item.get(&item).is_some_and(|b| {
            b.binary_search_by_key(&bid, |b| b.id)
                .is_ok_and(|i| b[i].user == user)
        });
        if !found && wrong.is_none() {
            wrong = Some(format!(
                "bids_by_user names bid {bid} of user {user} on item {item}, which does not exist"
            ));
        }
    });
    if let Some(w) = wrong {
        return Err(w);
    }
    let total: usize = per_item.values().map(Vec::len).sum();
    if by_user != total {
        return Err(format!("{total} bids but {by_user} bids_by_user entries"));
    }
    Ok(per_item)
}

/// Conditions 1 and 2.
fn auctions<P: Protocol>(
    db: &Database<P>,
    t: &Tables,
    bids: &HashMap<u64, Vec<Bid>>,
) -> Result<(), String> {
    let mut failure = None;
    let mut covered = 0;
    let mut amounts = Vec::new();
    db.for_each_row_quiescent(t.items, |item, row| {
        let mine = bids.get(&item).map_or(&[][..], |b| &b[..]);
        covered += mine.len();
        if failure.is_some() {
            return;
        }
        let fail = |what: String| Some(format!("item {item}: {what}"));
        let nb = row.i64(items::NB_OF_BIDS);
        if nb != mine.len() as i64 {
            failure = fail(format!("nb_of_bids is {nb} but it has {} bids", mine.len()));
            return;
        }
        let max = mine.iter().map(|b| b.amount).max().unwrap_or(0);
        let max_bid = row.i64(items::MAX_BID);
        if max_bid != max {
            failure = fail(format!("max_bid is {max_bid} but its highest bid is {max}"));
            return;
        }
        match (row.tuple(items::MAX_BIDDER), mine.is_empty()) {
            (None, true) => {}
            (None, false) => failure = fail("has bids but no max_bidder".into()),
            (Some(_), true) => failure = fail("has a max_bidder but no bids".into()),
            (Some(tuple), false) => {
                let bidder = id_of(tuple.value);
                if tuple.order != max_bid {
                    failure = fail(format!(
                        "max_bidder's order {} is not max_bid {max_bid}",
                        tuple.order
                    ));
                } else if !mine.iter().any(|b| b.amount == max && b.user == bidder) {
                    failure = fail(format!("max_bidder {bidder} did not bid {max}"));
                }
            }
        }
        if failure.is_some() {
            return;
        }
        amounts.clear();
        amounts.extend(mine.iter().map(|b| b.amount));
        amounts.sort_unstable_by(|a, b| b.cmp(a));
        amounts.dedup();
        amounts.truncate(BID_HISTORY as usize);
        let mut k = 0;
        for e in row.topk(items::BIDS) {
            let bid = id_of(e.value);
            if amounts.get(k) != Some(&e.order) {
                failure = fail(format!(
                    "bids top-K entry {k} has order {}, the {k}-th highest distinct bid is {:?}",
                    e.order,
                    amounts.get(k)
                ));
                return;
            }
            if !mine.iter().any(|b| b.id == bid && b.amount == e.order) {
                failure = fail(format!(
                    "bids top-K names bid {bid} of {}, not one of its bids",
                    e.order
                ));
                return;
            }
            k += 1;
        }
        if k != amounts.len() {
            failure = fail(format!(
                "bids top-K holds {k} bids, expected {}",
                amounts.len()
            ));
        }
    });
    if let Some(f) = failure {
        return Err(f);
    }
    let total: usize = bids.values().map(Vec::len).sum();
    if covered != total {
        return Err(format!(
            "{} bids are on items that do not exist",
            total - covered
        ));
    }
    Ok(())
}

/// Condition 3.
fn ratings<P: Protocol>(db: &Database<P>, t: &Tables) -> Result<(), String> {
    let mut sums: HashMap<u64, i64> = HashMap::new();
    db.for_each_row_quiescent(t.comments, |key, row| {
        *sums.entry(user_of_user_key(key)).or_default() += row.i64(comments::RATING);
    });
    let mut failure = None;
    db.for_each_row_quiescent(t.users, |user, row| {
        let (rating, sum) = (row.i64(users::RATING), sums.remove(&user).unwrap_or(0));
        if rating != sum && failure.is_none() {
            failure = Some(format!(
                "user {user}: rating is {rating} but the comments about them sum to {sum}"
            ));
        }
    });
    if let Some(f) = failure {
        return Err(f);
    }
    if let Some(user) = sums.keys().next() {
        return Err(format!("comments about user {user}, who does not exist"));
    }
    Ok(())
}

/// Condition 4.
fn newest_items<P: Protocol>(db: &Database<P>, t: &Tables) -> Result<(), String> {
    let mut region_of = HashMap::new();
    db.for_each_row_quiescent(t.users, |user, row| {
        region_of.insert(user, row.u64(users::REGION));
    });
    let mut in_category: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut in_region: HashMap<u64, Vec<u64>> = HashMap::new();
    db.for_each_row_quiescent(t.items, |item, row| {
        in_category
            .entry(row.u64(items::CATEGORY))
            .or_default()
            .push(item);
        let region = region_of.get(&row.u64(items::SELLER)).copied().unwrap_or(0);
        in_region.entry(region).or_default().push(item);
    });
    for (what, table, mut expected) in [
        ("category", t.categories, in_category),
        ("region", t.regions, in_region),
    ] {
        newest_of(db, what, table, &mut expected)?;
    }
    Ok(())
}

/// Condition 4 on one table: the top-K set of each row against the items expected in it.
fn newest_of<P: Protocol>(
    db: &Database<P>,
    what: &str,
    table: TableId,
    expected: &mut HashMap<u64, Vec<u64>>,
) -> Result<(), String> {
    let mut failure = None;
    db.for_each_row_quiescent(table, |key, row| {
        let mut all = expected.remove(&key).unwrap_or_default();
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.truncate(PAGE as usize);
        let listed: Vec<(i64, u64)> = row
            .topk(named::NEW_ITEMS)
            .map(|e| (e.order, id_of(e.value)))
            .collect();
        let want: Vec<(i64, u64)> = all.iter().map(|&i| (i as i64, i)).collect();
        if listed != want && failure.is_none() {
            failure = Some(format!(
                "{what} {key}: newest items are {listed:?}, expected {want:?}"
            ));
        }
    });
    if let Some(f) = failure {
        return Err(f);
    }
    if let Some(key) = expected.keys().next() {
        return Err(format!("items in {what} {key}, which does not exist"));
    }
    Ok(())
}

/// Condition 5, the indexes: nicknames and items by seller.
fn indexes<P: Protocol>(db: &Database<P>, t: &Tables) -> Result<(), String> {
    let mut nicknames_of = HashMap::new();
    db.for_each_row_quiescent(t.nicknames, |key, row| {
        nicknames_of.insert(row.u64(nicknames::USER), key);
    });
    let mut failure = None;
    let mut users_seen = 0;
    db.for_each_row_quiescent(t.users, |user, row| {
        users_seen += 1;
        let key = nickname_key(row.bytes(users::NICKNAME));
        if nicknames_of.get(&user) != Some(&key) && failure.is_none() {
            failure = Some(format!("user {user}'s nickname is not indexed"));
        }
    });
    if users_seen != nicknames_of.len() {
        failure.get_or_insert(format!(
            "{users_seen} users but {} nicknames",
            nicknames_of.len()
        ));
    }
    let mut sellers = HashSet::new();
    db.for_each_row_quiescent(t.items_by_seller, |key, row| {
        sellers.insert((key >> (64 - USER_BITS), row.u64(items_by_seller::ITEM)));
    });
    let mut items_seen = 0;
    db.for_each_row_quiescent(t.items, |item, row| {
        items_seen += 1;
        if !sellers.contains(&(row.u64(items::SELLER), item)) && failure.is_none() {
            failure = Some(format!("item {item} is not indexed under its seller"));
        }
    });
    if items_seen != sellers.len() {
        failure.get_or_insert(format!(
            "{items_seen} items but {} by-seller entries",
            sellers.len()
        ));
    }
    failure.map_or(Ok(()), Err)
}

/// Condition 5, quantities: loaded items' quantities against the purchases.
fn quantities<P: Protocol>(db: &Database<P>, t: &Tables, loaded: &Loaded) -> Result<(), String> {
    let mut bought: HashMap<u64, u64> = HashMap::new();
    db.for_each_row_quiescent(t.buy_now, |_, row| {
        *bought.entry(row.u64(buy_now::ITEM)).or_default() += row.u64(buy_now::QTY);
    });
    let mut failure = None;
    db.for_each_row_quiescent(t.items, |item, row| {
        let Some(&at_load) = loaded.quantities.get(item as usize - 1) else {
            return;
        };
        let (left, sold) = (
            row.u64(items::QUANTITY),
            bought.get(&item).copied().unwrap_or(0),
        );
        if left + sold != at_load as u64 && failure.is_none() {
            failure = Some(format!(
                "item {item}: {left} left and {sold} bought, but {at_load} at load"
            ));
        }
    });
    failure.map_or(Ok(()), Err)
}
