//! RUBiS, the auction site benchmark, as the Doppel paper runs it (§7, §8.8): the seven tables, the
//! 17 database transactions behind RUBiS's 26 interactions, and the two mixes RUBiS-B (RUBiS's
//! bidding mix) and RUBiS-C (half the transactions bid on zipfian-chosen items).
//!
//! Doppel's port rewrites StoreBid, StoreComment and StoreItem to update the materialized auction
//! metadata (`max_bid`, `max_bidder`, `nb_of_bids`, the per-item top-K set of bids), user ratings
//! and the per-category and per-region top-K sets of newest items with splittable operations only
//! (Max, OPut, Add, TopKInsert), and SearchItemsByCategory, SearchItemsByRegion and ViewBidHistory
//! to read those top-K sets; on a contended item Doppel then runs bids in parallel.
//!
//! The 26 interactions map to transactions as follows (pages with no database access run none):
//! Home, Browse, Register, Sell, SellItemForm and the PutBidAuth, PutCommentAuth, BuyNowAuth and
//! AboutMe login forms are static; RegisterUser, BrowseCategories (and BrowseCategoriesInRegion),
//! BrowseRegions, SearchItemsByCategory, SearchItemsByRegion, ViewItem, ViewUserInfo,
//! ViewBidHistory, BuyNow, StoreBuyNow, PutBid, StoreBid, PutComment, StoreComment,
//! SelectCategoryToSellItem, RegisterItem (StoreItem) and AboutMe are one transaction each.
//! Each worker emulates browsers submitting requests back to back, with no think time.

mod bid;
mod browse;
mod buy;
mod check;
mod comment;
mod config;
mod ids;
mod input;
mod load;
pub mod schema;
mod sell;
mod user;

use phasedb_keys::Zipf;
use phasedb_txn::{Database, Protocol, TxError, TxResult, Worker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;
pub use config::{RubisConfig, RubisMix};
use ids::{IdBlocks, IdSource};
use input::{Request, Shape};
use load::Loaded;
use schema::Tables;

/// Index of StoreBid in the statistics.
pub const STORE_BID: usize = 0;
/// Index of StoreComment in the statistics.
pub const STORE_COMMENT: usize = 1;
/// Index of StoreItem (RUBiS's RegisterItem) in the statistics.
pub const STORE_ITEM: usize = 2;
/// Index of SearchItemsByCategory in the statistics.
pub const SEARCH_ITEMS_BY_CATEGORY: usize = 3;
/// Index of SearchItemsByRegion in the statistics.
pub const SEARCH_ITEMS_BY_REGION: usize = 4;
/// Index of ViewBidHistory in the statistics.
pub const VIEW_BID_HISTORY: usize = 5;
/// Index of ViewItem in the statistics.
pub const VIEW_ITEM: usize = 6;
/// Index of ViewUserInfo in the statistics.
pub const VIEW_USER_INFO: usize = 7;
/// Index of PutBid in the statistics.
pub const PUT_BID: usize = 8;
/// Index of PutComment in the statistics.
pub const PUT_COMMENT: usize = 9;
/// Index of BuyNow in the statistics.
pub const BUY_NOW: usize = 10;
/// Index of StoreBuyNow in the statistics.
pub const STORE_BUY_NOW: usize = 11;
/// Index of RegisterUser in the statistics.
pub const REGISTER_USER: usize = 12;
/// Index of AboutMe in the statistics.
pub const ABOUT_ME: usize = 13;
/// Index of BrowseCategories in the statistics.
pub const BROWSE_CATEGORIES: usize = 14;
/// Index of BrowseRegions in the statistics.
pub const BROWSE_REGIONS: usize = 15;
/// Index of SelectCategoryToSellItem in the statistics.
pub const SELECT_CATEGORY_TO_SELL_ITEM: usize = 16;
/// Names of the transaction types, indexed like the statistics.
pub const TXN_TYPES: [&str; 17] = [
    "store-bid",
    "store-comment",
    "store-item",
    "search-items-by-category",
    "search-items-by-region",
    "view-bid-history",
    "view-item",
    "view-user-info",
    "put-bid",
    "put-comment",
    "buy-now",
    "store-buy-now",
    "register-user",
    "about-me",
    "browse-categories",
    "browse-regions",
    "select-category-to-sell-item",
];

/// The RUBiS workload.
pub struct Rubis {
    cfg: RubisConfig,
    tables: Tables,
    loaded: Loaded,
    /// The next free id of every table rows are inserted into.
    ids: IdSource,
    /// RUBiS-C's choice of the item to bid on.
    zipf: Option<Zipf>,
    /// Cumulative weights of the mix, indexed like [`TXN_TYPES`].
    cumulative: [u32; TXN_TYPES.len()],
}

/// A thread's generator state: its random numbers, the request being run and reusable buffers, so
/// that running a transaction allocates nothing.
pub struct RubisThread {
    rng: SmallRng,
    /// Ids of the rows the thread inserts.
    ids: IdBlocks,
    request: Request,
    scratch: Scratch,
}

/// Scratch space of the procedures, reused across transactions.
pub struct Scratch {
    /// Ids read from a top-K set or a scan, visited afterwards.
    ids: Vec<u64>,
}

/// The error for a row the population guarantees but a read did not find.
fn missing(what: &'static str) -> TxError {
    TxError::Invalid(what)
}

impl Rubis {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: RubisConfig) -> Rubis {
        let zipf = cfg.skewed().then(|| Zipf::new(cfg.items, cfg.alpha));
        let mut cumulative = cfg.mix.weights();
        for i in 1..cumulative.len() {
            cumulative[i] += cumulative[i - 1];
        }
        Rubis {
            cfg,
            tables: Tables::default(),
            loaded: Loaded::default(),
            ids: IdSource::default(),
            zipf,
            cumulative,
        }
    }

    /// The settings.
    pub fn config(&self) -> &RubisConfig {
        &self.cfg
    }

    /// The ids of the tables (valid after `setup`).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    fn pick(&self, rng: &mut SmallRng) -> usize {
        let total = self.cumulative[self.cumulative.len() - 1];
        let r = rng.random_range(0..total);
        self.cumulative.partition_point(|&c| c <= r)
    }
}

impl Workload for Rubis {
    type Thread = RubisThread;

    fn name(&self) -> &'static str {
        "rubis"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        TXN_TYPES.to_vec()
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let c = &self.cfg;
        let (users, items) = (c.users as usize, c.items as usize);
        let bids = items * c.bids_per_item as usize + 1024;
        let comments = items * c.comments_per_item as usize + 1024;
        self.tables = Tables::create(db, users, items, bids, comments);
        self.loaded = load::load(db, &self.tables, c);
        let l = &self.loaded;
        self.ids = IdSource::new([c.users, c.items, l.bids, l.comments, 0]);
    }

    fn thread(&self, index: usize, seed: u64) -> RubisThread {
        RubisThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ids: IdBlocks::default(),
            request: Request::default(),
            scratch: Scratch {
                ids: Vec::with_capacity(4 * schema::PAGE as usize),
            },
        }
    }

    fn rng<'a>(&self, thread: &'a mut RubisThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut RubisThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let ty = self.pick(&mut th.rng);
        let shape = Shape {
            cfg: &self.cfg,
            ids: &self.ids,
            zipf: self.zipf.as_ref(),
        };
        th.request.generate(ty, &mut th.rng, &shape, &mut th.ids);
        let (t, r, s) = (&self.tables, &th.request, &mut th.scratch);
        let (categories, regions) = (self.cfg.categories, self.cfg.regions);
        let outcome = match ty {
            STORE_BID => worker.execute(ty, |tx| bid::store_bid(tx, t, r)),
            STORE_COMMENT => worker.execute(ty, |tx| comment::store_comment(tx, t, r)),
            STORE_ITEM => worker.execute(ty, |tx| sell::store_item(tx, t, r)),
            SEARCH_ITEMS_BY_CATEGORY => worker
                .execute(ty, |tx| browse::search_items_by_category(tx, t, r, s))
                .map(drop),
            SEARCH_ITEMS_BY_REGION => worker
                .execute(ty, |tx| browse::search_items_by_region(tx, t, r, s))
                .map(drop),
            VIEW_BID_HISTORY => worker
                .execute(ty, |tx| bid::view_bid_history(tx, t, r, s))
                .map(drop),
            VIEW_ITEM => worker
                .execute(ty, |tx| browse::view_item(tx, t, r))
                .map(drop),
            VIEW_USER_INFO => worker
                .execute(ty, |tx| user::view_user_info(tx, t, r, s))
                .map(drop),
            PUT_BID => worker.execute(ty, |tx| bid::put_bid(tx, t, r)),
            PUT_COMMENT => worker.execute(ty, |tx| comment::put_comment(tx, t, r)),
            BUY_NOW => worker.execute(ty, |tx| buy::buy_now(tx, t, r)),
            STORE_BUY_NOW => worker.execute(ty, |tx| buy::store_buy_now(tx, t, r)),
            REGISTER_USER => worker.execute(ty, |tx| user::register_user(tx, t, r)),
            ABOUT_ME => worker
                .execute(ty, |tx| user::about_me(tx, t, r, s))
                .map(drop),
            BROWSE_CATEGORIES => worker
                .execute(ty, |tx| browse::browse_categories(tx, t, r, categories))
                .map(drop),
            BROWSE_REGIONS => worker
                .execute(ty, |tx| browse::names(tx, t.regions, regions))
                .map(drop),
            _ => worker
                .execute(ty, |tx| {
                    sell::select_category_to_sell_item(tx, t, r, categories)
                })
                .map(drop),
        };
        match outcome {
            // StoreBuyNow of more than is left: the error page RUBiS shows, counted as a user abort.
            Err(TxError::UserAbort) => Ok(()),
            r => r,
        }
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        check::check(db, &self.tables, &self.loaded)
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let c = &self.cfg;
        let mut s = vec![
            ("mix", c.mix.name().into()),
            ("users", c.users.to_string()),
            ("items", c.items.to_string()),
            ("categories", c.categories.to_string()),
            ("regions", c.regions.to_string()),
            ("bids_per_item", c.bids_per_item.to_string()),
            ("comments_per_item", c.comments_per_item.to_string()),
        ];
        if c.mix == RubisMix::Contended {
            s.push(("alpha", c.alpha.to_string()));
        }
        s
    }
}
