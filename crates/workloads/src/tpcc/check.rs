//! The consistency conditions of clause 3.3.2, read through transactions: all twelve, plus the
//! agreement of the two secondary indexes with their tables. Orders and order lines, which have no
//! ordered index, and history rows, which have no key a check could range over, are gathered once by
//! walking their tables (the check runs after the workload, with nothing running).
//!
//! - 1: W_YTD = sum(D_YTD). 8: W_YTD = sum(H_AMOUNT) over the warehouse's history rows (H_W_ID).
//!   9: D_YTD = sum(H_AMOUNT) over the district's history rows (H_W_ID, H_D_ID). Payment adds to
//!   W_YTD and D_YTD commutatively; the check reads them after the run, when every add is in.
//! - 2-7: order ids, new-order rows, order-line counts and delivery markers.
//! - 10: C_BALANCE = sum(OL_AMOUNT of the customer's delivered order lines) - sum(H_AMOUNT of the
//!   customer's history rows, H_C_W_ID, H_C_D_ID, H_C_ID). 12: C_BALANCE + C_YTD_PAYMENT = the same
//!   delivered OL_AMOUNT.
//! - 11: (count(*) from ORDER) - (count(*) from NEW-ORDER) = 2100 per district. The population has
//!   2,100 delivered orders per district and NewOrder adds one row to each table, but every Delivery
//!   deletes a NEW-ORDER row and keeps its ORDER row, so the condition as written holds only until the
//!   district's first delivery. It is checked as written when the mix has no Delivery. With Delivery
//!   in the mix it is checked counting the deliveries made since the load, which Delivery records in
//!   C_DELIVERY_CNT (0 at load): count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT) over the
//!   district's customers, which is the condition as written until the first delivery.
//!
//! A node of a partitioned deployment holds only some warehouses, with every row of each (a history
//! row goes with the warehouse paid to, H_W_ID), and checks the conditions on those. All of them
//! but 10 read only the warehouse's own rows; 10 also needs the history rows of payments made
//! through other warehouses (remote customers), so it is checked only when every warehouse is held.

use std::collections::HashMap;

use phasedb_txn::{Database, Protocol, Tx, TxResult, columns};

use super::schema::*;

/// What one district's orders look like.
#[derive(Clone, Copy, Default)]
struct OrderInfo {
    exists: bool,
    c_id: u32,
    ol_cnt: u64,
    carrier: u64,
    lines: u64,
    new_order: bool,
}

/// An order as the check needs it: its id, customer, line count and carrier (0: undelivered).
#[derive(Clone, Copy)]
struct Order {
    o: u32,
    c_id: u32,
    ol_cnt: u64,
    carrier: u64,
}

/// An order line as the check needs it: its order, amount and whether it was delivered.
#[derive(Clone, Copy)]
struct Line {
    o: u32,
    amount: i64,
    delivered: bool,
}

/// Orders delivered per district at load (O_ID 1..=2100): condition 11's 2100.
const LOADED_DELIVERED: u64 = FIRST_NEW_ORDER as u64 - 1;

/// Sums of H_AMOUNT over the history rows, by the warehouse and district paid to (conditions 8 and 9)
/// and by the customer who paid (condition 10).
struct Payments {
    /// Indexed by H_W_ID (0 unused).
    warehouse: Vec<i64>,
    /// Indexed by `district_index(H_W_ID, H_D_ID)`.
    district: Vec<i64>,
    /// Indexed by `district_index(H_C_W_ID, H_C_D_ID) * (CUSTOMERS + 1) + H_C_ID` (C_ID 0 unused).
    customer: Vec<i64>,
}

fn district_index(w: u32, d: u32) -> usize {
    ((w - 1) * DISTRICTS + (d - 1)) as usize
}

/// Sums every history row's H_AMOUNT, or names the first row whose ids name no customer or district.
fn payments<P: Protocol>(
    db: &Database<P>,
    t: &Tables,
    warehouses: u32,
) -> Result<Payments, String> {
    let districts = (warehouses * DISTRICTS) as usize;
    let per_d = CUSTOMERS as usize + 1;
    let mut p = Payments {
        warehouse: vec![0; warehouses as usize + 1],
        district: vec![0; districts],
        customer: vec![0; districts * per_d],
    };
    let mut wrong = None;
    db.for_each_row_quiescent(t.history, |key, row| {
        use history::*;
        let id = |c| u32::try_from(row.u64(c)).unwrap_or(u32::MAX);
        let (w, d) = (id(H_W_ID), id(H_D_ID));
        let (c_w, c_d, c) = (id(H_C_W_ID), id(H_C_D_ID), id(H_C_ID));
        let district = |w, d| (1..=warehouses).contains(&w) && (1..=DISTRICTS).contains(&d);
        if !district(w, d) || !district(c_w, c_d) || !(1..=CUSTOMERS).contains(&c) {
            wrong.get_or_insert(format!(
                "history row {key:#x} names warehouse {w} district {d} and customer {c} of \
                 warehouse {c_w} district {c_d}, which do not all exist"
            ));
            return;
        }
        let amount = row.i64(H_AMOUNT);
        p.warehouse[w as usize] += amount;
        p.district[district_index(w, d)] += amount;
        p.customer[district_index(c_w, c_d) * per_d + c as usize] += amount;
    });
    wrong.map_or(Ok(p), Err)
}

/// Checks every condition on the warehouses of `1..=warehouses` that are `held`; the first failure
/// names the condition and the place. `delivery_in_mix` says whether Delivery may have run (see
/// condition 11 in the module comment).
pub fn check<P: Protocol>(
    db: &Database<P>,
    t: &Tables,
    warehouses: u32,
    delivery_in_mix: bool,
    held: impl Fn(u32) -> bool,
) -> Result<(), String> {
    let mut lines: HashMap<(u32, u32), Vec<Line>> = HashMap::new();
    db.for_each_row_quiescent(t.order_line, |key, row| {
        use order_line::*;
        let (w, d, o, _) = order_line_of_key(key);
        lines.entry((w, d)).or_default().push(Line {
            o,
            amount: row.i64(OL_AMOUNT),
            delivered: row.u64(OL_DELIVERY_D) != 0,
        });
    });
    let mut orders: HashMap<(u32, u32), Vec<Order>> = HashMap::new();
    db.for_each_row_quiescent(t.order, |key, row| {
        use order::*;
        let (w, d, o, _) = order_line_of_key(key);
        orders.entry((w, d)).or_default().push(Order {
            o,
            c_id: row.u64(O_C_ID) as u32,
            ol_cnt: row.u64(O_OL_CNT),
            carrier: row.u64(O_CARRIER_ID),
        });
    });
    if let Some((w, d)) = lines
        .keys()
        .chain(orders.keys())
        .find(|(w, d)| !(1..=warehouses).contains(w) || !(1..=DISTRICTS).contains(d))
    {
        return Err(format!(
            "an order or order line names warehouse {w} district {d}, which does not exist"
        ));
    }
    let payments = payments(db, t, warehouses)?;
    let per_d = CUSTOMERS as usize + 1;
    let all_held = (1..=warehouses).all(&held);
    for w in (1..=warehouses).filter(|&w| held(w)) {
        let paid = payments.warehouse[w as usize];
        let r = db.execute(|tx| warehouse_ytd(tx, t, w, paid));
        r.map_err(|e| format!("warehouse {w}: reading failed: {e}"))??;
        for d in 1..=DISTRICTS {
            let i = district_index(w, d);
            let gathered = District {
                orders: orders.get(&(w, d)).map_or(&[][..], Vec::as_slice),
                lines: lines.get(&(w, d)).map_or(&[][..], Vec::as_slice),
                paid: payments.district[i],
                customers_paid: all_held.then(|| &payments.customer[i * per_d..(i + 1) * per_d]),
                delivery_in_mix,
            };
            let r = db.execute(|tx| district(tx, t, w, d, &gathered));
            r.map_err(|e| format!("warehouse {w} district {d}: reading failed: {e}"))??;
        }
    }
    Ok(())
}

/// What the check gathered outside transactions for one district.
struct District<'a> {
    /// Its orders.
    orders: &'a [Order],
    /// Its order lines.
    lines: &'a [Line],
    /// sum(H_AMOUNT) of the history rows paid to it.
    paid: i64,
    /// sum(H_AMOUNT) of the history rows of each of its customers, indexed by C_ID; `None` when
    /// some of them may be held elsewhere (condition 10 is not checked then).
    customers_paid: Option<&'a [i64]>,
    /// Whether Delivery is in the mix (condition 11).
    delivery_in_mix: bool,
}

/// Condition 1: W_YTD = sum(D_YTD), and condition 8: W_YTD = `paid`, the sum of H_AMOUNT over the
/// history rows with H_W_ID = W_ID.
fn warehouse_ytd<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
    paid: i64,
) -> TxResult<Result<(), String>> {
    let w_ytd = match tx.get_columns(t.warehouse, warehouse_key(w), columns(&[warehouse::W_YTD]))? {
        Some(row) => row.i64(warehouse::W_YTD),
        None => return Ok(Err(format!("warehouse {w} is missing"))),
    };
    let mut sum = 0;
    for d in 1..=DISTRICTS {
        let cols = columns(&[district::D_YTD]);
        match tx.get_columns(t.district, district_key(w, d), cols)? {
            Some(row) => sum += row.i64(district::D_YTD),
            None => return Ok(Err(format!("warehouse {w} district {d} is missing"))),
        }
    }
    Ok(if w_ytd != sum {
        Err(format!(
            "condition 1 (W_YTD = sum(D_YTD)) fails in warehouse {w}: W_YTD = {w_ytd}, sum(D_YTD) = {sum}"
        ))
    } else if w_ytd != paid {
        Err(format!(
            "condition 8 (W_YTD = sum(H_AMOUNT) where H_W_ID = W_ID) fails in warehouse {w}: \
             W_YTD = {w_ytd}, sum(H_AMOUNT) = {paid}"
        ))
    } else {
        Ok(())
    })
}

/// Conditions 2-7 and 9-12 on district (w, d), and the secondary indexes.
fn district<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
    d: u32,
    gathered: &District<'_>,
) -> TxResult<Result<(), String>> {
    let at = format!("in warehouse {w} district {d}");
    let (next_o_id, d_ytd) = match tx.get_columns(
        t.district,
        district_key(w, d),
        columns(&[district::D_NEXT_O_ID, district::D_YTD]),
    )? {
        Some(row) => (
            row.u64(district::D_NEXT_O_ID) as u32,
            row.i64(district::D_YTD),
        ),
        None => return Ok(Err(format!("district missing {at}"))),
    };
    if d_ytd != gathered.paid {
        return Ok(Err(format!(
            "condition 9 (D_YTD = sum(H_AMOUNT) where (H_W_ID, H_D_ID) = (D_W_ID, D_ID)) fails {at}: \
             D_YTD = {d_ytd}, sum(H_AMOUNT) = {}",
            gathered.paid
        )));
    }
    // Orders, indexed by O_ID.
    let mut orders = vec![OrderInfo::default(); next_o_id as usize + 1];
    let (lo, hi) = (order_key(w, d, 0), order_key(w, d, u32::MAX));
    let mut max_o_id = 0;
    let mut beyond = None;
    for order in gathered.orders {
        let o = order.o;
        max_o_id = max_o_id.max(o);
        match orders.get_mut(o as usize) {
            Some(info) => {
                *info = OrderInfo {
                    exists: true,
                    c_id: order.c_id,
                    ol_cnt: order.ol_cnt,
                    carrier: order.carrier,
                    ..OrderInfo::default()
                }
            }
            None => beyond = Some(o),
        }
    }
    if let Some(o) = beyond {
        return Ok(Err(format!(
            "condition 2 fails {at}: order {o} exists at or past D_NEXT_O_ID = {next_o_id}"
        )));
    }
    let (mut min_no, mut max_no, mut count_no) = (u32::MAX, 0, 0u64);
    let mut orphan_new_order = None;
    tx.scan(
        t.new_order,
        lo,
        hi,
        usize::MAX,
        columns(&[new_order::NO_O_ID]),
        |key, _| {
            let o = order_of_key(key);
            (min_no, max_no, count_no) = (min_no.min(o), max_no.max(o), count_no + 1);
            match orders.get_mut(o as usize) {
                Some(info) if info.exists => info.new_order = true,
                _ => orphan_new_order = Some(o),
            }
            true
        },
    )?;
    if let Some(o) = orphan_new_order {
        return Ok(Err(format!("new-order row {o} has no order {at}")));
    }
    if max_o_id != next_o_id - 1 || (count_no > 0 && max_no != max_o_id) {
        return Ok(Err(format!(
            "condition 2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)) fails {at}: \
             D_NEXT_O_ID = {next_o_id}, max(O_ID) = {max_o_id}, max(NO_O_ID) = {max_no}"
        )));
    }
    if count_no > 0 && (max_no - min_no + 1) as u64 != count_no {
        return Ok(Err(format!(
            "condition 3 (max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER) fails {at}: \
             min {min_no}, max {max_no}, {count_no} rows"
        )));
    }
    // Order lines: counts per order, delivery dates, delivered amounts per customer.
    let mut delivered = vec![0i64; CUSTOMERS as usize + 1];
    let mut line_errors = None;
    let mut total_lines = 0u64;
    for line in gathered.lines {
        total_lines += 1;
        let o = line.o;
        let Some(info) = orders.get_mut(o as usize).filter(|i| i.exists) else {
            line_errors = Some(format!("order line of missing order {o} {at}"));
            break;
        };
        info.lines += 1;
        if line.delivered != (info.carrier != 0) {
            line_errors = Some(format!(
                "condition 7 (OL_DELIVERY_D is null iff O_CARRIER_ID is null) fails {at} \
                 order {o}"
            ));
            break;
        }
        if line.delivered {
            delivered[info.c_id as usize] += line.amount;
        }
    }
    if let Some(e) = line_errors {
        return Ok(Err(e));
    }
    let ol_cnt_sum: u64 = orders.iter().map(|o| o.ol_cnt).sum();
    if ol_cnt_sum != total_lines {
        return Ok(Err(format!(
            "condition 4 (sum(O_OL_CNT) = rows in ORDER-LINE) fails {at}: \
             sum(O_OL_CNT) = {ol_cnt_sum}, {total_lines} order lines"
        )));
    }
    for (o, info) in orders.iter().enumerate().filter(|(_, i)| i.exists) {
        if (info.carrier == 0) != info.new_order {
            return Ok(Err(format!(
                "condition 5 (O_CARRIER_ID is null iff a NEW-ORDER row exists) fails {at} order {o}"
            )));
        }
        if info.ol_cnt != info.lines {
            return Ok(Err(format!(
                "condition 6 (O_OL_CNT = its order lines) fails {at} order {o}: \
                 O_OL_CNT = {}, {} lines",
                info.ol_cnt, info.lines
            )));
        }
    }
    // Condition 10: C_BALANCE = the customer's delivered OL_AMOUNT - its H_AMOUNT.
    // Condition 12: C_BALANCE + C_YTD_PAYMENT = sum of the customer's delivered OL_AMOUNT.
    let mut deliveries = 0u64;
    for c in 1..=CUSTOMERS {
        use customer::*;
        let cols = columns(&[C_BALANCE, C_YTD_PAYMENT, C_DELIVERY_CNT]);
        let Some(row) = tx.get_columns(t.customer, customer_key(w, d, c), cols)? else {
            return Ok(Err(format!("customer {c} missing {at}")));
        };
        let (balance, ytd) = (row.i64(C_BALANCE), row.i64(C_YTD_PAYMENT));
        deliveries += row.u64(C_DELIVERY_CNT);
        let ordered = delivered[c as usize];
        if let Some(paid) = gathered.customers_paid.map(|p| p[c as usize])
            && balance != ordered - paid
        {
            return Ok(Err(format!(
                "condition 10 (C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT)) fails {at} \
                 customer {c}: C_BALANCE = {balance}, {ordered} - {paid} = {}",
                ordered - paid
            )));
        }
        if balance + ytd != ordered {
            return Ok(Err(format!(
                "condition 12 (C_BALANCE + C_YTD_PAYMENT = delivered OL_AMOUNT) fails {at} \
                 customer {c}: {balance} + {ytd} != {ordered}"
            )));
        }
    }
    // Condition 11: count(ORDER) - count(NEW-ORDER) = 2100, plus the deliveries since the load when
    // Delivery is in the mix.
    let count_o = orders.iter().filter(|o| o.exists).count() as i64;
    let diff = count_o - count_no as i64;
    if !gathered.delivery_in_mix && diff != LOADED_DELIVERED as i64 {
        return Ok(Err(format!(
            "condition 11 ((count(*) from ORDER) - (count(*) from NEW-ORDER) = {LOADED_DELIVERED}, \
             the mix having no Delivery) fails {at}: {count_o} - {count_no} = {diff}"
        )));
    }
    let expected = LOADED_DELIVERED + deliveries;
    if gathered.delivery_in_mix && diff != expected as i64 {
        return Ok(Err(format!(
            "condition 11 counting deliveries ((count(*) from ORDER) - (count(*) from NEW-ORDER) = \
             {LOADED_DELIVERED} + sum(C_DELIVERY_CNT)) fails {at}: {count_o} - {count_no} = {diff}, \
             {LOADED_DELIVERED} + {deliveries} = {expected}"
        )));
    }
    Ok(indexes(tx, t, w, d, &orders)?.map_err(|e| format!("{e} {at}")))
}

/// The last-name index has one entry per customer, and the by-customer order index one entry per
/// order, naming its customer.
fn indexes<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
    d: u32,
    orders: &[OrderInfo],
) -> TxResult<Result<(), String>> {
    let lo = customer_name_key(w, d, 0, 0);
    let hi = customer_name_key(w, d, 999, MAX_C);
    let names = tx.scan(
        t.customer_name,
        lo,
        hi,
        usize::MAX,
        columns(&[customer_name::C_FIRST]),
        |_, _| true,
    )?;
    if names != CUSTOMERS as usize {
        return Ok(Err(format!(
            "the last-name index has {names} entries, not {CUSTOMERS},"
        )));
    }
    let (lo, hi) = (
        order_customer_key(w, d, 0, u32::MAX),
        order_customer_key(w, d, MAX_C, 0),
    );
    let mut wrong = None;
    let entries = tx.scan(
        t.order_customer,
        lo,
        hi,
        usize::MAX,
        columns(&[order_customer::O_ID]),
        |_, row| {
            let o = row.u64(order_customer::O_ID) as usize;
            if !orders.get(o).is_some_and(|i| i.exists) {
                wrong = Some(o);
            }
            wrong.is_none()
        },
    )?;
    let count = orders.iter().filter(|o| o.exists).count();
    Ok(match wrong {
        Some(o) => Err(format!(
            "the by-customer order index names order {o}, which does not exist,"
        )),
        None if entries != count => Err(format!(
            "the by-customer order index has {entries} entries for {count} orders"
        )),
        None => Ok(()),
    })
}
