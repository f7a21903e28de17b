//! The seven RUBiS tables (users, items, categories, regions, bids, buy_now, comments), the
//! secondary indexes the queries need, their column ids, column groups and keys.
//!
//! Representation choices:
//! - Money is an `I64` count of cents; dates are `U64` microseconds since the Unix epoch.
//! - The auction metadata RUBiS materializes per item (`max_bid`, `max_bidder`, `nb_of_bids`), the
//!   per-item top-K index of bids (Doppel's `bidsPerItemIndex`) and the per-category and per-region
//!   top-K sets of newest items each sit in a column group of their own: Doppel splits a column group
//!   for one operation, and readers of an item's static fields must not conflict with bidders.
//! - Ids are dense (see the `ids` module), so they fit the fields of composite keys.

use phasedb_storage::{ColumnType, CompositeKey, Schema, TableSpec};
use phasedb_txn::{Database, Protocol, TableId};

use ColumnType::{Bounded, I64, TopK, Tuple, U64};

/// Bits of a user id in composite keys.
pub const USER_BITS: u32 = 28;
/// Bits of an item id in composite keys.
pub const ITEM_BITS: u32 = 28;
/// Bits of a bid, comment or buy-now id in composite keys.
pub const ROW_BITS: u32 = 36;

/// Entries of a search page and of the per-category and per-region top-K sets of newest items
/// (RUBiS shows 25 items per page).
pub const PAGE: u8 = 25;
/// Entries of the per-item top-K set of highest bids, which ViewBidHistory shows.
pub const BID_HISTORY: u8 = 20;
/// Entries of each list on the AboutMe page.
pub const ABOUT_ME_LIST: usize = 10;

/// USERS columns. Groups: static fields, `rating` (StoreComment's Add).
pub mod users {
    use super::*;
    pub const FIRSTNAME: usize = 0;
    pub const LASTNAME: usize = 1;
    pub const NICKNAME: usize = 2;
    pub const PASSWORD: usize = 3;
    pub const EMAIL: usize = 4;
    pub const CREATION_DATE: usize = 5;
    pub const REGION: usize = 6;
    pub const BALANCE: usize = 7;
    pub const RATING: usize = 8;
    pub(super) const COLUMNS: &[Col] = &[
        ("firstname", Bounded(20), 0),
        ("lastname", Bounded(20), 0),
        ("nickname", Bounded(20), 0),
        ("password", Bounded(20), 0),
        ("email", Bounded(50), 0),
        ("creation_date", U64, 0),
        ("region", U64, 0),
        ("balance", I64, 0),
        ("rating", I64, 1),
    ];
}

/// Index of users by nickname (authentication and RegisterUser's uniqueness test): key
/// [`nickname_key`], row the user id.
pub mod nicknames {
    use super::*;
    pub const USER: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("user_id", U64, 0)];
}

/// ITEMS columns. Groups: static fields; quantity and end date (StoreBuyNow); then one group each
/// for `max_bid` (Max), `max_bidder` (OPut, order = bid, bytes = bidder id), `nb_of_bids` (Add) and
/// `bids` (TopKInsert, order = bid, bytes = bid id).
pub mod items {
    use super::*;
    pub const NAME: usize = 0;
    pub const DESCRIPTION: usize = 1;
    pub const INITIAL_PRICE: usize = 2;
    pub const RESERVE_PRICE: usize = 3;
    pub const BUY_NOW: usize = 4;
    pub const START_DATE: usize = 5;
    pub const SELLER: usize = 6;
    pub const CATEGORY: usize = 7;
    pub const QUANTITY: usize = 8;
    pub const END_DATE: usize = 9;
    pub const MAX_BID: usize = 10;
    pub const MAX_BIDDER: usize = 11;
    pub const NB_OF_BIDS: usize = 12;
    pub const BIDS: usize = 13;
    pub(super) const COLUMNS: &[Col] = &[
        ("name", Bounded(40), 0),
        ("description", Bounded(100), 0),
        ("initial_price", I64, 0),
        ("reserve_price", I64, 0),
        ("buy_now", I64, 0),
        ("start_date", U64, 0),
        ("seller", U64, 0),
        ("category", U64, 0),
        ("quantity", U64, 1),
        ("end_date", U64, 1),
        ("max_bid", I64, 2),
        ("max_bidder", Tuple(8), 3),
        ("nb_of_bids", I64, 4),
        (
            "bids",
            TopK {
                k: BID_HISTORY,
                n: 8,
            },
            5,
        ),
    ];
}

/// Index of items by seller (AboutMe's items for sale): key [`item_seller_key`], row the item id.
pub mod items_by_seller {
    use super::*;
    pub const ITEM: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("item_id", U64, 0)];
}

/// CATEGORIES and REGIONS columns (same shape). Groups: the name, the top-K set of newest items
/// (TopKInsert by StoreItem, order = item id, bytes = item id).
pub mod named {
    use super::*;
    pub const NAME: usize = 0;
    pub const NEW_ITEMS: usize = 1;
    pub(super) const COLUMNS: &[Col] = &[
        ("name", Bounded(50), 0),
        ("new_items", TopK { k: PAGE, n: 8 }, 1),
    ];
}

/// BIDS columns; key the bid id.
pub mod bids {
    use super::*;
    pub const USER: usize = 0;
    pub const ITEM: usize = 1;
    pub const QTY: usize = 2;
    pub const BID: usize = 3;
    pub const MAX_BID: usize = 4;
    pub const DATE: usize = 5;
    pub(super) const COLUMNS: &[Col] = &[
        ("user_id", U64, 0),
        ("item_id", U64, 0),
        ("qty", U64, 0),
        ("bid", I64, 0),
        ("max_bid", I64, 0),
        ("date", U64, 0),
    ];
}

/// Index of bids by bidder (AboutMe's bids): key [`user_row_key`] (user, bid id), row the item id.
pub mod bids_by_user {
    use super::*;
    pub const ITEM: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("item_id", U64, 0)];
}

/// BUY_NOW columns; key [`user_row_key`] (buyer, buy-now id).
pub mod buy_now {
    use super::*;
    pub const ITEM: usize = 0;
    pub const QTY: usize = 1;
    pub const DATE: usize = 2;
    pub(super) const COLUMNS: &[Col] = &[("item_id", U64, 0), ("qty", U64, 0), ("date", U64, 0)];
}

/// COMMENTS columns; key [`user_row_key`] (the user commented on, comment id).
pub mod comments {
    use super::*;
    pub const FROM_USER: usize = 0;
    pub const ITEM: usize = 1;
    pub const RATING: usize = 2;
    pub const DATE: usize = 3;
    pub const COMMENT: usize = 4;
    pub(super) const COLUMNS: &[Col] = &[
        ("from_user_id", U64, 0),
        ("item_id", U64, 0),
        ("rating", I64, 0),
        ("date", U64, 0),
        ("comment", Bounded(60), 0),
    ];
}

/// A column: name, type, group.
type Col = (&'static str, ColumnType, usize);

fn schema(cols: &[Col]) -> Schema {
    cols.iter()
        .fold(Schema::builder(), |b, &(name, ty, group)| {
            b.column(name, ty, group)
        })
        .build()
        .expect("the RUBiS schemas are valid")
}

/// The ids of the RUBiS tables in a database.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tables {
    pub users: TableId,
    pub nicknames: TableId,
    pub items: TableId,
    pub items_by_seller: TableId,
    pub categories: TableId,
    pub regions: TableId,
    pub bids: TableId,
    pub bids_by_user: TableId,
    pub buy_now: TableId,
    pub comments: TableId,
}

impl Tables {
    /// Creates the tables, sized for `users` users and `items` items with `bids` and `comments`
    /// loaded rows and room to grow; ordered indexes where transactions scan.
    pub fn create<P: Protocol>(
        db: &mut Database<P>,
        users: usize,
        items: usize,
        bids: usize,
        comments: usize,
    ) -> Tables {
        let mut t = |name: &str, cols: &[Col], capacity: usize, ordered: bool| {
            let spec = TableSpec::new(name, schema(cols), capacity);
            db.create_table(if ordered { spec.ordered() } else { spec })
        };
        Tables {
            users: t("users", users::COLUMNS, users * 2, false),
            nicknames: t("user_nicknames", nicknames::COLUMNS, users * 2, false),
            items: t("items", items::COLUMNS, items * 2, false),
            items_by_seller: t("items_by_seller", items_by_seller::COLUMNS, items * 2, true),
            categories: t("categories", named::COLUMNS, 64, false),
            regions: t("regions", named::COLUMNS, 128, false),
            bids: t("bids", bids::COLUMNS, bids * 4, false),
            bids_by_user: t("bids_by_user", bids_by_user::COLUMNS, bids * 4, true),
            buy_now: t("buy_now", buy_now::COLUMNS, items, true),
            comments: t("comments", comments::COLUMNS, comments * 2, true),
        }
    }
}

/// The id stored as the bytes of a top-K entry or ordered tuple.
pub fn id_of(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    u64::from_le_bytes(b)
}

/// Key of a row belonging to a user: bids by bidder, buy-now rows by buyer, comments by the user
/// commented on. A user's rows are contiguous, so AboutMe and ViewUserInfo scan them.
pub fn user_row_key(user: u64, row: u64) -> u64 {
    CompositeKey::new()
        .field(user, USER_BITS)
        .field(row, ROW_BITS)
        .key()
}

/// The range of [`user_row_key`] keys of `user`.
pub fn user_rows(user: u64) -> (u64, u64) {
    (
        user_row_key(user, 0),
        user_row_key(user, (1 << ROW_BITS) - 1),
    )
}

/// The row id of a [`user_row_key`].
pub fn row_of_user_key(key: u64) -> u64 {
    key & ((1 << ROW_BITS) - 1)
}

/// The user of a [`user_row_key`].
pub fn user_of_user_key(key: u64) -> u64 {
    key >> ROW_BITS
}

/// Key of item `item` in the by-seller index.
pub fn item_seller_key(seller: u64, item: u64) -> u64 {
    CompositeKey::new()
        .field(seller, USER_BITS)
        .field(item, ITEM_BITS)
        .key()
}

/// The range of by-seller keys of `seller`.
pub fn seller_items(seller: u64) -> (u64, u64) {
    (
        item_seller_key(seller, 0),
        item_seller_key(seller, (1 << ITEM_BITS) - 1),
    )
}

/// Key of a nickname in the nickname index: its 64-bit FNV-1a hash.
pub fn nickname_key(nickname: &[u8]) -> u64 {
    nickname.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The seller of loaded item `item` among `users` loaded users: fixed, so that a comment on an item
/// can name its seller without reading the item, as RUBiS's PutComment page hands it to
/// StoreComment.
pub fn seller_of(item: u64, users: u64) -> u64 {
    1 + (item.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16) % users
}

/// Formats `args` into `out` (cut to its length); returns the length written. Builds the strings of
/// RUBiS's population ("user42", "password42"...) without allocating.
pub fn format_into(out: &mut [u8], args: std::fmt::Arguments<'_>) -> usize {
    use std::io::Write;
    let total = out.len();
    let mut cursor = &mut out[..];
    // A full buffer cuts the text short, which is what a bounded column does anyway.
    let _ = cursor.write_fmt(args);
    total - cursor.len()
}
