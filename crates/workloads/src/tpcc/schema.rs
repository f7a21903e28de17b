//! The nine TPC-C tables (clause 1.3) plus two secondary indexes, their column ids, their column
//! groups in coarse and fine mode, and their composite keys.
//!
//! Representation choices:
//! - Key fields (`W_ID`, `D_ID`, `O_ID`, ...) live in the 64-bit primary key, not in the row, except
//!   where a row refers to another table (`O_C_ID`, `OL_I_ID`, `H_C_ID`...).
//! - Money is an `I64` count of cents (`numeric(n,2)` exactly, so sums compare exactly); tax and
//!   discount rates (`numeric(4,4)`) are `I64` counts of 1/10000. Dates are `U64` microseconds since
//!   the Unix epoch, 0 for null; a null `O_CARRIER_ID` is 0.
//! - Variable-length text is `Bounded`, fixed-length text (`W_STATE`, `W_ZIP`, `C_CREDIT`...) `Fixed`.
//!
//! Fine mode gives a row one column group of fields no transaction updates and one more group per set
//! of fields updated together by the same transactions, so reading a rarely-updated field (`D_TAX`) does
//! not conflict with writing a counter (`D_YTD`). Coarse mode puts every column in group 0.

use phasedb_storage::{ColumnType, CompositeKey, Schema, TableSpec};
use phasedb_txn::{Database, Protocol, TableId};

use ColumnType::{Bounded, Fixed, I64, U64};

/// Bits of a warehouse id in keys (so at most 65,535 warehouses).
pub const W_BITS: u32 = 16;
const D_BITS: u32 = 4;
pub(super) const C_BITS: u32 = 12;
const O_BITS: u32 = 32;
const OL_BITS: u32 = 4;
const I_BITS: u32 = 17;
const LAST_BITS: u32 = 10;
const ORIGIN_BITS: u32 = 16;
const SEQ_BITS: u32 = 32;

/// Districts per warehouse.
pub const DISTRICTS: u32 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3_000;
/// Items (and stock rows per warehouse).
pub const ITEMS: u32 = 100_000;
/// Orders per district at load.
pub const ORDERS: u32 = 3_000;
/// The first loaded order that is still undelivered (a new-order row exists from here on).
pub const FIRST_NEW_ORDER: u32 = 2_101;
/// Most order lines per order.
pub const MAX_OL_CNT: usize = 15;

/// A column: name, type, and the fine-mode group (0 = never updated).
type Col = (&'static str, ColumnType, usize);

fn schema(cols: &[Col], fine: bool) -> Schema {
    cols.iter()
        .fold(Schema::builder(), |b, &(name, ty, group)| {
            b.column(name, ty, if fine { group } else { 0 })
        })
        .build()
        .expect("the TPC-C schemas are valid")
}

/// WAREHOUSE columns. Fine groups: static, `W_YTD` (Payment).
pub mod warehouse {
    use super::*;
    pub const W_NAME: usize = 0;
    pub const W_STREET_1: usize = 1;
    pub const W_STREET_2: usize = 2;
    pub const W_CITY: usize = 3;
    pub const W_STATE: usize = 4;
    pub const W_ZIP: usize = 5;
    pub const W_TAX: usize = 6;
    pub const W_YTD: usize = 7;
    pub(super) const COLUMNS: &[Col] = &[
        ("W_NAME", Bounded(10), 0),
        ("W_STREET_1", Bounded(20), 0),
        ("W_STREET_2", Bounded(20), 0),
        ("W_CITY", Bounded(20), 0),
        ("W_STATE", Fixed(2), 0),
        ("W_ZIP", Fixed(9), 0),
        ("W_TAX", I64, 0),
        ("W_YTD", I64, 1),
    ];
}

/// DISTRICT columns. Fine groups: static, `D_YTD` (Payment), `D_NEXT_O_ID` (NewOrder).
pub mod district {
    use super::*;
    pub const D_NAME: usize = 0;
    pub const D_STREET_1: usize = 1;
    pub const D_STREET_2: usize = 2;
    pub const D_CITY: usize = 3;
    pub const D_STATE: usize = 4;
    pub const D_ZIP: usize = 5;
    pub const D_TAX: usize = 6;
    pub const D_YTD: usize = 7;
    pub const D_NEXT_O_ID: usize = 8;
    pub(super) const COLUMNS: &[Col] = &[
        ("D_NAME", Bounded(10), 0),
        ("D_STREET_1", Bounded(20), 0),
        ("D_STREET_2", Bounded(20), 0),
        ("D_CITY", Bounded(20), 0),
        ("D_STATE", Fixed(2), 0),
        ("D_ZIP", Fixed(9), 0),
        ("D_TAX", I64, 0),
        ("D_YTD", I64, 1),
        ("D_NEXT_O_ID", U64, 2),
    ];
}

/// CUSTOMER columns. Fine groups: static, balances and counts (Payment, Delivery), `C_DATA`
/// (Payment of a bad-credit customer).
pub mod customer {
    use super::*;
    pub const C_FIRST: usize = 0;
    pub const C_MIDDLE: usize = 1;
    pub const C_LAST: usize = 2;
    pub const C_STREET_1: usize = 3;
    pub const C_STREET_2: usize = 4;
    pub const C_CITY: usize = 5;
    pub const C_STATE: usize = 6;
    pub const C_ZIP: usize = 7;
    pub const C_PHONE: usize = 8;
    pub const C_SINCE: usize = 9;
    pub const C_CREDIT: usize = 10;
    pub const C_CREDIT_LIM: usize = 11;
    pub const C_DISCOUNT: usize = 12;
    pub const C_BALANCE: usize = 13;
    pub const C_YTD_PAYMENT: usize = 14;
    pub const C_PAYMENT_CNT: usize = 15;
    pub const C_DELIVERY_CNT: usize = 16;
    pub const C_DATA: usize = 17;
    pub(super) const COLUMNS: &[Col] = &[
        ("C_FIRST", Bounded(16), 0),
        ("C_MIDDLE", Fixed(2), 0),
        ("C_LAST", Bounded(16), 0),
        ("C_STREET_1", Bounded(20), 0),
        ("C_STREET_2", Bounded(20), 0),
        ("C_CITY", Bounded(20), 0),
        ("C_STATE", Fixed(2), 0),
        ("C_ZIP", Fixed(9), 0),
        ("C_PHONE", Fixed(16), 0),
        ("C_SINCE", U64, 0),
        ("C_CREDIT", Fixed(2), 0),
        ("C_CREDIT_LIM", I64, 0),
        ("C_DISCOUNT", I64, 0),
        ("C_BALANCE", I64, 1),
        ("C_YTD_PAYMENT", I64, 1),
        ("C_PAYMENT_CNT", U64, 1),
        ("C_DELIVERY_CNT", U64, 1),
        ("C_DATA", Bounded(500), 2),
    ];
}

/// HISTORY columns (the table has no primary key in TPC-C; ours is a unique insertion number).
pub mod history {
    use super::*;
    pub const H_C_ID: usize = 0;
    pub const H_C_D_ID: usize = 1;
    pub const H_C_W_ID: usize = 2;
    pub const H_D_ID: usize = 3;
    pub const H_W_ID: usize = 4;
    pub const H_DATE: usize = 5;
    pub const H_AMOUNT: usize = 6;
    pub const H_DATA: usize = 7;
    pub(super) const COLUMNS: &[Col] = &[
        ("H_C_ID", U64, 0),
        ("H_C_D_ID", U64, 0),
        ("H_C_W_ID", U64, 0),
        ("H_D_ID", U64, 0),
        ("H_W_ID", U64, 0),
        ("H_DATE", U64, 0),
        ("H_AMOUNT", I64, 0),
        ("H_DATA", Bounded(24), 0),
    ];
}

/// NEW-ORDER columns (the key holds everything; the row repeats `NO_O_ID`).
pub mod new_order {
    use super::*;
    pub const NO_O_ID: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("NO_O_ID", U64, 0)];
}

/// ORDER columns. Fine groups: static, `O_CARRIER_ID` (Delivery).
pub mod order {
    use super::*;
    pub const O_C_ID: usize = 0;
    pub const O_ENTRY_D: usize = 1;
    pub const O_OL_CNT: usize = 2;
    pub const O_ALL_LOCAL: usize = 3;
    pub const O_CARRIER_ID: usize = 4;
    pub(super) const COLUMNS: &[Col] = &[
        ("O_C_ID", U64, 0),
        ("O_ENTRY_D", U64, 0),
        ("O_OL_CNT", U64, 0),
        ("O_ALL_LOCAL", U64, 0),
        ("O_CARRIER_ID", U64, 1),
    ];
}

/// ORDER-LINE columns. Fine groups: static, `OL_DELIVERY_D` (Delivery).
pub mod order_line {
    use super::*;
    pub const OL_I_ID: usize = 0;
    pub const OL_SUPPLY_W_ID: usize = 1;
    pub const OL_QUANTITY: usize = 2;
    pub const OL_AMOUNT: usize = 3;
    pub const OL_DIST_INFO: usize = 4;
    pub const OL_DELIVERY_D: usize = 5;
    pub(super) const COLUMNS: &[Col] = &[
        ("OL_I_ID", U64, 0),
        ("OL_SUPPLY_W_ID", U64, 0),
        ("OL_QUANTITY", U64, 0),
        ("OL_AMOUNT", I64, 0),
        ("OL_DIST_INFO", Fixed(24), 0),
        ("OL_DELIVERY_D", U64, 1),
    ];
}

/// ITEM columns (never updated).
pub mod item {
    use super::*;
    pub const I_IM_ID: usize = 0;
    pub const I_NAME: usize = 1;
    pub const I_PRICE: usize = 2;
    pub const I_DATA: usize = 3;
    pub(super) const COLUMNS: &[Col] = &[
        ("I_IM_ID", U64, 0),
        ("I_NAME", Bounded(24), 0),
        ("I_PRICE", I64, 0),
        ("I_DATA", Bounded(50), 0),
    ];
}

/// STOCK columns. Fine groups: static (`S_DIST_xx`, `S_DATA`), quantities and counts (NewOrder).
pub mod stock {
    use super::*;
    /// `S_DIST_01`; district `d`'s column is `S_DIST_01 + d - 1`.
    pub const S_DIST_01: usize = 0;
    pub const S_DATA: usize = 10;
    pub const S_QUANTITY: usize = 11;
    pub const S_YTD: usize = 12;
    pub const S_ORDER_CNT: usize = 13;
    pub const S_REMOTE_CNT: usize = 14;
    pub(super) const COLUMNS: &[Col] = &[
        ("S_DIST_01", Fixed(24), 0),
        ("S_DIST_02", Fixed(24), 0),
        ("S_DIST_03", Fixed(24), 0),
        ("S_DIST_04", Fixed(24), 0),
        ("S_DIST_05", Fixed(24), 0),
        ("S_DIST_06", Fixed(24), 0),
        ("S_DIST_07", Fixed(24), 0),
        ("S_DIST_08", Fixed(24), 0),
        ("S_DIST_09", Fixed(24), 0),
        ("S_DIST_10", Fixed(24), 0),
        ("S_DATA", Bounded(50), 0),
        ("S_QUANTITY", U64, 1),
        ("S_YTD", U64, 1),
        ("S_ORDER_CNT", U64, 1),
        ("S_REMOTE_CNT", U64, 1),
    ];
}

/// Secondary index of customers by last name: key (w, d, last-name number, c), row `C_FIRST` (so the
/// matches can be sorted by first name without reading the customers).
pub mod customer_name {
    use super::*;
    /// The customer's `C_FIRST`, zero-padded so byte order is string order.
    pub const C_FIRST: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("C_FIRST", Fixed(16), 0)];
}

/// Secondary index of orders by customer: key (w, d, c, inverted o) so a customer's newest order
/// comes first in a scan; the row repeats `O_ID`.
pub mod order_customer {
    use super::*;
    pub const O_ID: usize = 0;
    pub(super) const COLUMNS: &[Col] = &[("O_ID", U64, 0)];
}

/// The ids of the TPC-C tables in a database.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub history: TableId,
    pub new_order: TableId,
    pub order: TableId,
    pub order_line: TableId,
    pub item: TableId,
    pub stock: TableId,
    pub customer_name: TableId,
    pub order_customer: TableId,
}

impl Tables {
    /// Creates the tables for `warehouses` warehouses, sized for the initial population plus room to
    /// grow. Tables read by key have a hash index: orders and order lines (readers know the order id,
    /// from the district or the by-customer index, and the line count, `O_OL_CNT`), and history,
    /// which is only inserted into. Tables that are scanned and never looked up by key have only an
    /// ordered index: new orders (Delivery), and the last-name and by-customer indexes (Payment,
    /// OrderStatus).
    pub fn create<P: Protocol>(db: &mut Database<P>, warehouses: u32, fine: bool) -> Tables {
        let w = warehouses as usize;
        let per_d = (DISTRICTS * CUSTOMERS) as usize * w;
        let mut t = |name: &str, cols: &[Col], capacity: usize, ordered: bool| {
            let spec = TableSpec::new(name, schema(cols, fine), capacity);
            db.create_table(if ordered { spec.ordered_only() } else { spec })
        };
        Tables {
            warehouse: t("warehouse", warehouse::COLUMNS, w, false),
            district: t("district", district::COLUMNS, w * DISTRICTS as usize, false),
            customer: t("customer", customer::COLUMNS, per_d, false),
            history: t("history", history::COLUMNS, per_d * 4, false),
            new_order: t("new_order", new_order::COLUMNS, per_d, true),
            order: t("orders", order::COLUMNS, per_d * 4, false),
            order_line: t("order_line", order_line::COLUMNS, per_d * 40, false),
            item: t("item", item::COLUMNS, ITEMS as usize, false),
            stock: t("stock", stock::COLUMNS, ITEMS as usize * w, false),
            customer_name: t("customer_last_name", customer_name::COLUMNS, per_d, true),
            order_customer: t("order_customer", order_customer::COLUMNS, per_d * 4, true),
        }
    }
}

/// Key of warehouse `w`.
pub fn warehouse_key(w: u32) -> u64 {
    w as u64
}

/// Key of district `d` of warehouse `w`.
pub fn district_key(w: u32, d: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .key()
}

/// Key of customer `c` of district (w, d).
pub fn customer_key(w: u32, d: u32, c: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .field(c as u64, C_BITS)
        .key()
}

/// Key of the last-name index entry of customer `c` of district (w, d) whose last name is number
/// `last` (0..=999).
pub fn customer_name_key(w: u32, d: u32, last: u32, c: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .field(last as u64, LAST_BITS)
        .field(c as u64, C_BITS)
        .key()
}

/// Largest customer id a key can hold (the top of a last-name range).
pub const MAX_C: u32 = (1 << C_BITS) - 1;

/// The customer id of a last-name index key.
pub fn customer_of_name_key(key: u64) -> u32 {
    ((key >> (64 - W_BITS - D_BITS - LAST_BITS - C_BITS)) & MAX_C as u64) as u32
}

/// Key of order `o` of district (w, d); also the key of its new-order row.
pub fn order_key(w: u32, d: u32, o: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .field(o as u64, O_BITS)
        .key()
}

/// The order id of an order or new-order key.
pub fn order_of_key(key: u64) -> u32 {
    (key >> (64 - W_BITS - D_BITS - O_BITS)) as u32
}

/// Key of line `ol` (1..=15) of order `o` of district (w, d).
pub fn order_line_key(w: u32, d: u32, o: u32, ol: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .field(o as u64, O_BITS)
        .field(ol as u64, OL_BITS)
        .key()
}

/// The (warehouse, district, order, line) of an order-line key.
pub fn order_line_of_key(key: u64) -> (u32, u32, u32, u32) {
    let field = |shift: u32, bits: u32| ((key >> (64 - shift)) & ((1u64 << bits) - 1)) as u32;
    (
        field(W_BITS, W_BITS),
        field(W_BITS + D_BITS, D_BITS),
        field(W_BITS + D_BITS + O_BITS, O_BITS),
        field(W_BITS + D_BITS + O_BITS + OL_BITS, OL_BITS),
    )
}

/// Key of the by-customer index entry of order `o` of customer `c` of district (w, d): newer orders
/// sort first.
pub fn order_customer_key(w: u32, d: u32, c: u32, o: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(d as u64, D_BITS)
        .field(c as u64, C_BITS)
        .field((u32::MAX - o) as u64, O_BITS)
        .key()
}

/// Key of the stock row of item `i` in warehouse `w`.
pub fn stock_key(w: u32, i: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(i as u64, I_BITS)
        .key()
}

/// Key of a history row (HISTORY has no primary key in TPC-C): the warehouse paid to (`H_W_ID`, so
/// the row is partitioned with its warehouse), the number of whoever inserted it (0 for the load, a
/// thread or request generator otherwise; at most [`MAX_HISTORY_ORIGIN`]) and its sequence number
/// there.
pub fn history_key(w: u32, origin: u32, seq: u32) -> u64 {
    CompositeKey::new()
        .field(w as u64, W_BITS)
        .field(origin as u64, ORIGIN_BITS)
        .field(seq as u64, SEQ_BITS)
        .key()
}

/// The origin a history key holds (see [`history_key`]).
pub fn history_origin_of(key: u64) -> u32 {
    ((key >> SEQ_BITS) & ((1 << ORIGIN_BITS) - 1)) as u32
}

/// Largest origin a history key can hold.
pub const MAX_HISTORY_ORIGIN: u32 = (1 << ORIGIN_BITS) - 1;

/// The warehouse of a key of any table but WAREHOUSE (whose key is the warehouse id) and ITEM
/// (which belongs to no warehouse): every other key starts with the warehouse id.
pub fn warehouse_of_key(key: u64) -> u32 {
    (key >> (64 - W_BITS)) as u32
}

/// Key of item `i`.
pub fn item_key(i: u32) -> u64 {
    i as u64
}
