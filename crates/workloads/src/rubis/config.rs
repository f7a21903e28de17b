//! RUBiS settings: scale, the initial bids and comments, and the transaction mix.

use phasedb_keys::Zipf;

use super::schema::{ITEM_BITS, USER_BITS};
use super::{STORE_BID, TXN_TYPES};

/// Which transactions run, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RubisMix {
    /// RUBiS-B: RUBiS's bidding mix, about 15% read-write transactions; items chosen uniformly.
    Bidding,
    /// RUBiS-C: half the transactions are StoreBids on items chosen zipfian with skew `alpha`, the
    /// other transactions keep their bidding-mix proportions in the other half.
    Contended,
}

/// The bidding mix in hundredths of a percent of the database transactions. The twelve transactions
/// Doppel's own RUBiS port (ddtxn) runs take its weights; BrowseCategories (with
/// BrowseCategoriesInRegion), BrowseRegions, BuyNow, AboutMe and SelectCategoryToSellItem, which it
/// leaves out, are estimated from the entry probabilities of RUBiS's default bidding transition
/// table. Writes (StoreBid, StoreComment, StoreItem, StoreBuyNow, RegisterUser) come to 13.6%.
/// Indexed like [`TXN_TYPES`].
const BIDDING: [u32; TXN_TYPES.len()] = [
    370,  // StoreBid
    50,   // StoreComment
    181,  // StoreItem (RegisterItem)
    1340, // SearchItemsByCategory
    547,  // SearchItemsByRegion
    134,  // ViewBidHistory
    1130, // ViewItem
    213,  // ViewUserInfo
    497,  // PutBid
    55,   // PutComment
    140,  // BuyNow
    140,  // StoreBuyNow
    180,  // RegisterUser
    460,  // AboutMe
    900,  // BrowseCategories
    260,  // BrowseRegions
    185,  // SelectCategoryToSellItem
];

impl RubisMix {
    /// Parses the command-line name: "b" or "c".
    pub fn parse(s: &str) -> Option<RubisMix> {
        match s {
            "b" => Some(RubisMix::Bidding),
            "c" => Some(RubisMix::Contended),
            _ => None,
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            RubisMix::Bidding => "b",
            RubisMix::Contended => "c",
        }
    }

    /// Relative weights of the transaction types, indexed like [`TXN_TYPES`].
    pub fn weights(self) -> [u32; TXN_TYPES.len()] {
        match self {
            RubisMix::Bidding => BIDDING,
            RubisMix::Contended => {
                let mut w = BIDDING;
                w[STORE_BID] = 0;
                w[STORE_BID] = w.iter().sum();
                w
            }
        }
    }
}

/// RUBiS settings.
#[derive(Clone, Debug)]
pub struct RubisConfig {
    /// Registered users at load (the paper: 1M).
    pub users: u64,
    /// Items on auction at load (the paper: 33K).
    pub items: u64,
    /// Categories (RUBiS: 20).
    pub categories: u64,
    /// Regions (RUBiS: 62).
    pub regions: u64,
    /// Bids loaded on every item.
    pub bids_per_item: u32,
    /// Comments loaded on every item (about its seller).
    pub comments_per_item: u32,
    /// Transaction mix.
    pub mix: RubisMix,
    /// RUBiS-C: zipfian skew of the items StoreBid bids on (0 = uniform; the paper goes to 1.8).
    pub alpha: f64,
}

impl Default for RubisConfig {
    fn default() -> Self {
        RubisConfig {
            users: 100_000,
            items: 33_000,
            categories: 20,
            regions: 62,
            bids_per_item: 5,
            comments_per_item: 1,
            mix: RubisMix::Bidding,
            alpha: 1.8,
        }
    }
}

impl RubisConfig {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        let max_users = 1u64 << (USER_BITS - 1);
        if !(2..=max_users).contains(&self.users) {
            return Err(format!("--users must be between 2 and {max_users}"));
        }
        let max_items = 1u64 << (ITEM_BITS - 1);
        if !(1..=max_items).contains(&self.items) {
            return Err(format!("--items must be between 1 and {max_items}"));
        }
        for (name, v) in [
            ("--categories", self.categories),
            ("--regions", self.regions),
        ] {
            if !(1..=10_000).contains(&v) {
                return Err(format!("{name} must be between 1 and 10000"));
            }
        }
        if self.bids_per_item > 1000 {
            return Err("--bids-per-item must be at most 1000".into());
        }
        if self.comments_per_item > 100 {
            return Err("--comments-per-item must be at most 100".into());
        }
        Zipf::check_skew("--alpha", self.alpha)
    }

    /// Whether StoreBid picks items zipfian (RUBiS-C with a positive skew).
    pub fn skewed(&self) -> bool {
        self.mix == RubisMix::Contended && self.alpha > 0.0
    }
}
