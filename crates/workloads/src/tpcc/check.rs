//! The consistency conditions of clause 3.3.2, read through transactions: 1-7 and 12, plus the
//! agreement of the two secondary indexes with their tables. Order lines, which have no ordered index,
//! are gathered once by walking their table (the check runs after the workload, with nothing running).

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

/// An order line as the check needs it: its order, amount and whether it was delivered.
#[derive(Clone, Copy)]
struct Line {
    o: u32,
    amount: i64,
    delivered: bool,
}

/// Checks every condition on every warehouse; the first failure names the condition and the place.
pub fn check<P: Protocol>(db: &Database<P>, t: &Tables, warehouses: u32) -> Result<(), String> {
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
    if let Some((w, d)) = lines
        .keys()
        .find(|(w, d)| !(1..=warehouses).contains(w) || !(1..=DISTRICTS).contains(d))
    {
        return Err(format!(
            "an order line names warehouse {w} district {d}, which does not exist"
        ));
    }
    for w in 1..=warehouses {
        let r = db.execute(|tx| warehouse_ytd(tx, t, w));
        r.map_err(|e| format!("warehouse {w}: reading failed: {e}"))??;
        for d in 1..=DISTRICTS {
            let district_lines = lines.get(&(w, d)).map_or(&[][..], Vec::as_slice);
            let r = db.execute(|tx| district(tx, t, w, d, district_lines));
            r.map_err(|e| format!("warehouse {w} district {d}: reading failed: {e}"))??;
        }
    }
    Ok(())
}

/// Condition 1: W_YTD = sum(D_YTD).
fn warehouse_ytd<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
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
    Ok(if w_ytd == sum {
        Ok(())
    } else {
        Err(format!(
            "condition 1 (W_YTD = sum(D_YTD)) fails in warehouse {w}: W_YTD = {w_ytd}, sum(D_YTD) = {sum}"
        ))
    })
}

/// Conditions 2-7 and 12 on district (w, d), and the secondary indexes.
fn district<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    w: u32,
    d: u32,
    lines: &[Line],
) -> TxResult<Result<(), String>> {
    let at = format!("in warehouse {w} district {d}");
    let next_o_id = match tx.get_columns(
        t.district,
        district_key(w, d),
        columns(&[district::D_NEXT_O_ID]),
    )? {
        Some(row) => row.u64(district::D_NEXT_O_ID) as u32,
        None => return Ok(Err(format!("district missing {at}"))),
    };
    // Orders, indexed by O_ID.
    let mut orders = vec![OrderInfo::default(); next_o_id as usize + 1];
    let (lo, hi) = (order_key(w, d, 0), order_key(w, d, u32::MAX));
    let mut max_o_id = 0;
    let mut beyond = None;
    {
        use order::*;
        let cols = columns(&[O_C_ID, O_OL_CNT, O_CARRIER_ID]);
        tx.scan(t.order, lo, hi, usize::MAX, cols, |key, row| {
            let o = order_of_key(key);
            max_o_id = max_o_id.max(o);
            match orders.get_mut(o as usize) {
                Some(info) => {
                    *info = OrderInfo {
                        exists: true,
                        c_id: row.u64(O_C_ID) as u32,
                        ol_cnt: row.u64(O_OL_CNT),
                        carrier: row.u64(O_CARRIER_ID),
                        ..OrderInfo::default()
                    }
                }
                None => beyond = Some(o),
            }
            true
        })?;
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
    for line in lines {
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
    // Condition 12: C_BALANCE + C_YTD_PAYMENT = sum of the customer's delivered OL_AMOUNT.
    for c in 1..=CUSTOMERS {
        use customer::*;
        let cols = columns(&[C_BALANCE, C_YTD_PAYMENT]);
        let Some(row) = tx.get_columns(t.customer, customer_key(w, d, c), cols)? else {
            return Ok(Err(format!("customer {c} missing {at}")));
        };
        let (balance, ytd) = (row.i64(C_BALANCE), row.i64(C_YTD_PAYMENT));
        if balance + ytd != delivered[c as usize] {
            return Ok(Err(format!(
                "condition 12 (C_BALANCE + C_YTD_PAYMENT = delivered OL_AMOUNT) fails {at} \
                 customer {c}: {balance} + {ytd} != {}",
                delivered[c as usize]
            )));
        }
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
