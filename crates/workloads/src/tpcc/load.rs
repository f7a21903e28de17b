//! The initial database population (clause 4.3.3.1), warehouses loaded in parallel.

use phasedb_storage::RowBuf;
use phasedb_txn::{Database, Protocol, TableId};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::random::{NuRandC, a_string, data_string, last_name, n_string, now_micros, zip};
use super::schema::*;

/// Seed of the load's random numbers (the population is the same for every run).
const LOAD_SEED: u64 = 0x7bcc_10ad;

/// Writes rows of one table through a reused image buffer.
struct Rows<'a, P: Protocol> {
    db: &'a Database<P>,
    buf: Vec<u64>,
}

impl<P: Protocol> Rows<'_, P> {
    fn put(&mut self, t: TableId, key: u64, fill: impl FnOnce(&mut RowBuf<'_>)) {
        let schema = self.db.table(t).schema();
        self.buf.clear();
        self.buf.resize(schema.row_words(), 0);
        fill(&mut RowBuf::new(schema, &mut self.buf));
        self.db
            .load_image(t, key, &self.buf)
            .expect("TPC-C load keys are distinct");
    }
}

/// Sets column `c` to a random a-string of `min..=max` characters.
fn set_a(rng: &mut SmallRng, r: &mut RowBuf<'_>, c: usize, min: usize, max: usize) {
    let mut s = [0u8; 500];
    let len = a_string(rng, min, max, &mut s);
    r.set_bytes(c, &s[..len]);
}

/// Sets the street, city, state and zip columns starting at `street_1`.
fn set_address(rng: &mut SmallRng, r: &mut RowBuf<'_>, street_1: usize) {
    set_a(rng, r, street_1, 10, 20);
    set_a(rng, r, street_1 + 1, 10, 20);
    set_a(rng, r, street_1 + 2, 10, 20);
    set_a(rng, r, street_1 + 3, 2, 2);
    r.set_bytes(street_1 + 4, &zip(rng));
}

/// Loads every table for `warehouses` warehouses; `c` are the NURand constants of the load. The rows
/// of each warehouse, and the items, are the same whatever else is loaded (each warehouse draws from
/// its own seed), so a node that loads only some warehouses has the same rows as a full load.
pub fn load<P: Protocol>(db: &Database<P>, t: &Tables, warehouses: u32, c: NuRandC) {
    load_items(db, t);
    let now = now_micros();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(warehouses as usize);
    std::thread::scope(|s| {
        for first in 0..threads {
            s.spawn(move || {
                for w in (first as u32 + 1..=warehouses).step_by(threads) {
                    load_warehouse(db, t, w, c, now);
                }
            });
        }
    });
}

/// Loads the items (which belong to no warehouse).
pub(super) fn load_items<P: Protocol>(db: &Database<P>, t: &Tables) {
    use super::schema::item::*;
    let mut rng = SmallRng::seed_from_u64(LOAD_SEED);
    let mut rows = Rows { db, buf: vec![] };
    let mut data = [0u8; 50];
    for i in 1..=ITEMS {
        rows.put(t.item, item_key(i), |r| {
            r.set_u64(I_IM_ID, rng.random_range(1..=10_000));
            set_a(&mut rng, r, I_NAME, 14, 24);
            r.set_i64(I_PRICE, rng.random_range(100..=10_000));
            let len = data_string(&mut rng, &mut data);
            r.set_bytes(I_DATA, &data[..len]);
        });
    }
}

/// The load date of a partitioned deployment's warehouses (2026-01-01 00:00 UTC, in µs since the
/// epoch): a fixed instant, so every replica of a warehouse loads the same rows, where each node's
/// clock would give each replica its own dates.
pub(super) const FIXED_LOAD_DATE: u64 = 1_767_225_600_000_000;

/// Loads warehouse `w` with its stock, districts, customers, history and orders, dated `now` (µs
/// since the epoch).
pub(super) fn load_warehouse<P: Protocol>(
    db: &Database<P>,
    t: &Tables,
    w: u32,
    c: NuRandC,
    now: u64,
) {
    let mut rng = SmallRng::seed_from_u64(LOAD_SEED ^ (w as u64).wrapping_mul(0x9e37_79b9));
    let mut rows = Rows { db, buf: vec![] };
    {
        use super::schema::warehouse::*;
        rows.put(t.warehouse, warehouse_key(w), |r| {
            set_a(&mut rng, r, W_NAME, 6, 10);
            set_address(&mut rng, r, W_STREET_1);
            r.set_i64(W_TAX, rng.random_range(0..=2000));
            r.set_i64(W_YTD, 30_000_000);
        });
    }
    load_stock(&mut rows, &mut rng, t, w);
    for d in 1..=DISTRICTS {
        use super::schema::district::*;
        rows.put(t.district, district_key(w, d), |r| {
            set_a(&mut rng, r, D_NAME, 6, 10);
            set_address(&mut rng, r, D_STREET_1);
            r.set_i64(D_TAX, rng.random_range(0..=2000));
            r.set_i64(D_YTD, 3_000_000);
            r.set_u64(D_NEXT_O_ID, ORDERS as u64 + 1);
        });
        load_customers(&mut rows, &mut rng, t, w, d, c, now);
        load_orders(&mut rows, &mut rng, t, w, d, now);
    }
}

fn load_stock<P: Protocol>(rows: &mut Rows<'_, P>, rng: &mut SmallRng, t: &Tables, w: u32) {
    use super::schema::stock::*;
    let mut data = [0u8; 50];
    for i in 1..=ITEMS {
        rows.put(t.stock, stock_key(w, i), |r| {
            r.set_u64(S_QUANTITY, rng.random_range(10..=100));
            for d in 0..DISTRICTS as usize {
                set_a(rng, r, S_DIST_01 + d, 24, 24);
            }
            r.set_u64(S_YTD, 0);
            r.set_u64(S_ORDER_CNT, 0);
            r.set_u64(S_REMOTE_CNT, 0);
            let len = data_string(rng, &mut data);
            r.set_bytes(S_DATA, &data[..len]);
        });
    }
}

fn load_customers<P: Protocol>(
    rows: &mut Rows<'_, P>,
    rng: &mut SmallRng,
    t: &Tables,
    w: u32,
    d: u32,
    nurand: NuRandC,
    now: u64,
) {
    use super::schema::customer::*;
    let mut first = [0u8; 16];
    let mut last = [0u8; 16];
    for c in 1..=CUSTOMERS {
        let number = if c <= 1000 {
            c - 1
        } else {
            super::random::last_name_number(rng, &nurand)
        };
        let last_len = last_name(number, &mut last);
        let first_len = a_string(rng, 8, 16, &mut first);
        rows.put(t.customer, customer_key(w, d, c), |r| {
            r.set_bytes(C_FIRST, &first[..first_len]);
            r.set_bytes(C_MIDDLE, b"OE");
            r.set_bytes(C_LAST, &last[..last_len]);
            set_address(rng, r, C_STREET_1);
            let mut phone = [0u8; 16];
            n_string(rng, 16, 16, &mut phone);
            r.set_bytes(C_PHONE, &phone);
            r.set_u64(C_SINCE, now);
            let bad = rng.random_range(0..10) == 0;
            r.set_bytes(C_CREDIT, if bad { b"BC" } else { b"GC" });
            r.set_i64(C_CREDIT_LIM, 5_000_000);
            r.set_i64(C_DISCOUNT, rng.random_range(0..=5000));
            r.set_i64(C_BALANCE, -1000);
            r.set_i64(C_YTD_PAYMENT, 1000);
            r.set_u64(C_PAYMENT_CNT, 1);
            r.set_u64(C_DELIVERY_CNT, 0);
            set_a(rng, r, C_DATA, 300, 500);
        });
        rows.put(t.customer_name, customer_name_key(w, d, number, c), |r| {
            r.set_bytes(customer_name::C_FIRST, &first[..first_len]);
        });
        rows.put(t.history, history_key(w, 0, d << C_BITS | c), |r| {
            use super::schema::history::*;
            r.set_u64(H_C_ID, c as u64);
            r.set_u64(H_C_D_ID, d as u64);
            r.set_u64(H_C_W_ID, w as u64);
            r.set_u64(H_D_ID, d as u64);
            r.set_u64(H_W_ID, w as u64);
            r.set_u64(H_DATE, now);
            r.set_i64(H_AMOUNT, 1000);
            set_a(rng, r, H_DATA, 12, 24);
        });
    }
}

fn load_orders<P: Protocol>(
    rows: &mut Rows<'_, P>,
    rng: &mut SmallRng,
    t: &Tables,
    w: u32,
    d: u32,
    now: u64,
) {
    use super::schema::order::*;
    use super::schema::order_line::*;
    // O_C_ID follows a random permutation of the customers.
    let mut customers: Vec<u32> = (1..=CUSTOMERS).collect();
    for i in (1..customers.len()).rev() {
        customers.swap(i, rng.random_range(0..=i));
    }
    for o in 1..=ORDERS {
        let c = customers[o as usize - 1];
        let delivered = o < FIRST_NEW_ORDER;
        let ol_cnt = rng.random_range(5..=15u32);
        rows.put(t.order, order_key(w, d, o), |r| {
            r.set_u64(O_C_ID, c as u64);
            r.set_u64(O_ENTRY_D, now);
            r.set_u64(
                O_CARRIER_ID,
                if delivered {
                    rng.random_range(1..=10)
                } else {
                    0
                },
            );
            r.set_u64(O_OL_CNT, ol_cnt as u64);
            r.set_u64(O_ALL_LOCAL, 1);
        });
        rows.put(t.order_customer, order_customer_key(w, d, c, o), |r| {
            r.set_u64(order_customer::O_ID, o as u64);
        });
        for ol in 1..=ol_cnt {
            rows.put(t.order_line, order_line_key(w, d, o, ol), |r| {
                r.set_u64(OL_I_ID, rng.random_range(1..=ITEMS as u64));
                r.set_u64(OL_SUPPLY_W_ID, w as u64);
                r.set_u64(OL_DELIVERY_D, if delivered { now } else { 0 });
                r.set_u64(OL_QUANTITY, 5);
                r.set_i64(
                    OL_AMOUNT,
                    if delivered {
                        0
                    } else {
                        rng.random_range(1..=999_999)
                    },
                );
                set_a(rng, r, OL_DIST_INFO, 24, 24);
            });
        }
        if !delivered {
            rows.put(t.new_order, order_key(w, d, o), |r| {
                r.set_u64(new_order::NO_O_ID, o as u64);
            });
        }
    }
}
