//! The input of one RUBiS transaction, as the emulated browser would submit it, generated from the
//! thread's random numbers, so a stashed transaction replays identically — but for the ids of the
//! rows it inserts, which are fresh each time (the stashed attempt inserted nothing).

use rand::RngExt;
use rand::rngs::SmallRng;

use super::comment::RATINGS;
use super::ids::{IdBlocks, IdSource, Kind};
use super::schema::seller_of;
use super::*;

/// Largest bid, in cents.
const MAX_BID_CENTS: i64 = 1_000_000;

/// The fields a transaction's form carries; each transaction uses the ones it needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request {
    /// The acting user (bidder, buyer, seller, commenter, or whose AboutMe page it is).
    pub user: u64,
    /// The user viewed (ViewUserInfo) or commented on (StoreComment).
    pub to_user: u64,
    /// The item.
    pub item: u64,
    /// The category searched or sold in.
    pub category: u64,
    /// The region searched, registered in, or browsed within (0: none).
    pub region: u64,
    /// Bid, or price of a new item, in cents.
    pub amount: i64,
    /// StoreBid: the bidder's automatic-bidding limit, in cents.
    pub max_bid: i64,
    /// Quantity bid on, bought, or put on sale.
    pub qty: u64,
    /// StoreComment: the rating given.
    pub rating: i64,
    /// Id of the row inserted (bid, comment, buy-now, item or user).
    pub new_id: u64,
    /// Date of the action (microseconds since the Unix epoch).
    pub date: u64,
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
}

/// What a generator needs to know about the database: its loaded sizes and the item choice.
pub struct Shape<'a> {
    pub cfg: &'a RubisConfig,
    /// Where the ids of inserted rows come from.
    pub ids: &'a IdSource,
    /// RUBiS-C's item choice for StoreBid.
    pub zipf: Option<&'a Zipf>,
}

impl Request {
    /// Generates the input of a transaction of type `ty`, taking ids of new rows from `ids`.
    pub fn generate(
        &mut self,
        ty: usize,
        rng: &mut SmallRng,
        shape: &Shape<'_>,
        ids: &mut IdBlocks,
    ) {
        let cfg = shape.cfg;
        let user = |rng: &mut SmallRng| rng.random_range(1..=cfg.users);
        let item = |rng: &mut SmallRng| rng.random_range(1..=cfg.items);
        self.date = now_micros();
        match ty {
            STORE_BID => {
                self.user = user(rng);
                self.item = match shape.zipf {
                    Some(z) => z.sample(rng) + 1,
                    None => item(rng),
                };
                self.amount = rng.random_range(1..=MAX_BID_CENTS);
                self.max_bid = self.amount + rng.random_range(0..=self.amount / 10);
                self.qty = 1;
                self.new_id = ids.take(shape.ids, Kind::Bids);
            }
            STORE_COMMENT => {
                self.user = user(rng);
                self.item = item(rng);
                self.to_user = seller_of(self.item, cfg.users);
                self.rating = RATINGS[rng.random_range(0..RATINGS.len())];
                self.new_id = ids.take(shape.ids, Kind::Comments);
            }
            STORE_ITEM => {
                self.user = user(rng);
                self.category = rng.random_range(1..=cfg.categories);
                self.amount = rng.random_range(100..=100_000);
                self.qty = if rng.random_bool(0.8) {
                    1
                } else {
                    rng.random_range(2..=10)
                };
                self.new_id = ids.take(shape.ids, Kind::Items);
            }
            SEARCH_ITEMS_BY_CATEGORY => self.category = rng.random_range(1..=cfg.categories),
            SEARCH_ITEMS_BY_REGION => {
                self.region = rng.random_range(1..=cfg.regions);
                self.category = rng.random_range(1..=cfg.categories);
            }
            VIEW_BID_HISTORY | VIEW_ITEM => self.item = item(rng),
            VIEW_USER_INFO => self.to_user = user(rng),
            PUT_BID | PUT_COMMENT | BUY_NOW => {
                self.user = user(rng);
                self.item = item(rng);
                self.to_user = seller_of(self.item, cfg.users);
            }
            STORE_BUY_NOW => {
                self.user = user(rng);
                self.item = item(rng);
                self.qty = 1;
                self.new_id = ids.take(shape.ids, Kind::BuyNow);
            }
            REGISTER_USER => {
                self.region = rng.random_range(1..=cfg.regions);
                self.new_id = ids.take(shape.ids, Kind::Users);
            }
            ABOUT_ME | SELECT_CATEGORY_TO_SELL_ITEM => self.user = user(rng),
            BROWSE_CATEGORIES => {
                // BrowseCategoriesInRegion: 260 of BrowseCategories' 900 (see the mix).
                self.region = if rng.random_ratio(26, 90) {
                    rng.random_range(1..=cfg.regions)
                } else {
                    0
                };
            }
            _ => {}
        }
    }
}
