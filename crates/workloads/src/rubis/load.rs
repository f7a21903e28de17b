//! The initial population, after RUBiS's generator: regions and categories, users (nickname
//! `"user<id>"`, password `"password<id>"`), items on auction in random categories, each with a few
//! increasing bids and comments about its seller, and the materialized auction metadata, ratings and
//! top-K sets consistent with them.

use phasedb_storage::ordered::{self, Tuple};
use phasedb_txn::{Database, Protocol};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::RubisConfig;
use super::comment::{COMMENT_TEXT, RATINGS};
use super::input::now_micros;
use super::schema::*;
use super::sell::{DESCRIPTION, DURATION};
use super::user::fill_user;

/// Seed of the load's random numbers (the population is the same for every run).
const LOAD_SEED: u64 = 0x2b1b_15ad;

/// What the workload keeps of the load: where new ids start, and the items' quantities at load (for
/// the check of StoreBuyNow).
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub bids: u64,
    pub comments: u64,
    /// Quantity of item `i` at load, at index `i - 1`.
    pub quantities: Vec<u8>,
}

/// The bytes of an empty top-K set of `k` ids.
fn empty_topk(k: u8) -> Vec<u8> {
    vec![0; ordered::topk_width(k, 8)]
}

/// Loads every table per `cfg` into `t`.
pub fn load<P: Protocol>(db: &Database<P>, t: &Tables, cfg: &RubisConfig) -> Loaded {
    let mut rng = SmallRng::seed_from_u64(LOAD_SEED);
    let now = now_micros();
    let region_of: Vec<u64> = (0..=cfg.users)
        .map(|_| rng.random_range(1..=cfg.regions))
        .collect();
    let mut ratings = vec![0i64; cfg.users as usize + 1];
    let mut newest_in_category = vec![empty_topk(PAGE); cfg.categories as usize + 1];
    let mut newest_in_region = vec![empty_topk(PAGE); cfg.regions as usize + 1];
    let mut loaded = Loaded::default();
    let mut name = [0u8; 64];
    for item in 1..=cfg.items {
        let seller = seller_of(item, cfg.users);
        let category = rng.random_range(1..=cfg.categories);
        let price: i64 = rng.random_range(100..=100_000);
        let quantity: u8 = if rng.random_bool(0.8) {
            1
        } else {
            rng.random_range(2..=10)
        };
        loaded.quantities.push(quantity);
        let start = now - rng.random_range(0..DURATION - DURATION / 7);
        let mut top_bids = empty_topk(BID_HISTORY);
        let (mut max_bid, mut max_bidder) = (0i64, 0u64);
        for _ in 0..cfg.bids_per_item {
            loaded.bids += 1;
            let bid = loaded.bids;
            let bidder = rng.random_range(1..=cfg.users);
            max_bid = max_bid.max(price) + rng.random_range(1..=1_000);
            max_bidder = bidder;
            db.load(t.bids, bid, |w| {
                w.set_u64(bids::USER, bidder);
                w.set_u64(bids::ITEM, item);
                w.set_u64(bids::QTY, 1);
                w.set_i64(bids::BID, max_bid);
                w.set_i64(bids::MAX_BID, max_bid);
                w.set_u64(bids::DATE, start);
            })
            .expect("bid ids are distinct");
            db.load(t.bids_by_user, user_row_key(bidder, bid), |w| {
                w.set_u64(bids_by_user::ITEM, item)
            })
            .expect("bid ids are distinct");
            ordered::topk_insert(&mut top_bids, 8, entry(max_bid, &bid.to_le_bytes()));
        }
        for _ in 0..cfg.comments_per_item {
            loaded.comments += 1;
            let rating = RATINGS[rng.random_range(0..RATINGS.len())];
            ratings[seller as usize] += rating;
            db.load(t.comments, user_row_key(seller, loaded.comments), |w| {
                w.set_u64(comments::FROM_USER, rng.random_range(1..=cfg.users));
                w.set_u64(comments::ITEM, item);
                w.set_i64(comments::RATING, rating);
                w.set_u64(comments::DATE, start);
                w.set_bytes(comments::COMMENT, COMMENT_TEXT);
            })
            .expect("comment ids are distinct");
        }
        let len = format_into(
            &mut name,
            format_args!("RUBiS automatically generated item #{item}"),
        );
        db.load(t.items, item, |w| {
            w.set_bytes(items::NAME, &name[..len]);
            w.set_bytes(items::DESCRIPTION, DESCRIPTION);
            w.set_i64(items::INITIAL_PRICE, price);
            w.set_i64(items::RESERVE_PRICE, price + price / 2);
            w.set_i64(items::BUY_NOW, 2 * price);
            w.set_u64(items::START_DATE, start);
            w.set_u64(items::SELLER, seller);
            w.set_u64(items::CATEGORY, category);
            w.set_u64(items::QUANTITY, quantity as u64);
            w.set_u64(items::END_DATE, start + DURATION);
            w.set_i64(items::MAX_BID, max_bid);
            if max_bidder != 0 {
                ordered::write_tuple(
                    w.raw_mut(items::MAX_BIDDER),
                    entry(max_bid, &max_bidder.to_le_bytes()),
                );
            }
            w.set_i64(items::NB_OF_BIDS, cfg.bids_per_item as i64);
            w.raw_mut(items::BIDS).copy_from_slice(&top_bids);
        })
        .expect("item ids are distinct");
        db.load(t.items_by_seller, item_seller_key(seller, item), |w| {
            w.set_u64(items_by_seller::ITEM, item)
        })
        .expect("item ids are distinct");
        let id = item.to_le_bytes();
        let listed = entry(item as i64, &id);
        ordered::topk_insert(&mut newest_in_category[category as usize], 8, listed);
        ordered::topk_insert(
            &mut newest_in_region[region_of[seller as usize] as usize],
            8,
            listed,
        );
    }
    let mut nick = [0u8; 32];
    for user in 1..=cfg.users {
        let len = format_into(&mut nick, format_args!("user{user}"));
        let nick = &nick[..len];
        db.load(t.users, user, |w| {
            fill_user(w, user, nick, region_of[user as usize], now);
            w.set_i64(users::RATING, ratings[user as usize]);
        })
        .expect("user ids are distinct");
        db.load(t.nicknames, nickname_key(nick), |w| {
            w.set_u64(nicknames::USER, user)
        })
        .expect("nicknames are distinct");
    }
    for (table, prefix, newest) in [
        (t.categories, "category", &newest_in_category),
        (t.regions, "region", &newest_in_region),
    ] {
        for (key, top) in newest.iter().enumerate().skip(1) {
            let len = format_into(&mut name, format_args!("{prefix}-{key}"));
            db.load(table, key as u64, |w| {
                w.set_bytes(named::NAME, &name[..len]);
                w.raw_mut(named::NEW_ITEMS).copy_from_slice(top);
            })
            .expect("category and region ids are distinct");
        }
    }
    loaded
}

/// A top-K entry or ordered tuple written by the load (core 0).
fn entry(order: i64, value: &[u8]) -> Tuple<'_> {
    Tuple {
        order,
        core: 0,
        value,
    }
}
