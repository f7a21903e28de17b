//! TPC-C: the initial population matches the specification, the consistency conditions hold after
//! load and after concurrent runs under every protocol and the check catches a break of each of
//! conditions 2, 4 and 8-11, every transaction type commits, NewOrder's invalid items roll back as user aborts, and a recorded run is
//! serializable.
//!
//! Runs are timed, so a seed fixes what each thread generates but not the interleaving; a failure
//! names the seed and `PHASEDB_SEED=<seed>` reruns with it.

use crate::common;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};

use phasedb_txn::{
    Adaptive, Config, Database, Doppel, NoCc, Occ, Protocol, SwissTm, TableId, TicToc,
    TwoPlBlocking, TwoPlNoWait, TwoPlWaitDie, TxError, Worker, columns,
};
use phasedb_workloads::tpcc::customer::{self, CustomerBy};
use phasedb_workloads::tpcc::schema::{self, Tables};
use phasedb_workloads::tpcc::{
    NEW_ORDER, PAYMENT, Scratch, TXN_TYPES, Tpcc, TpccConfig, TpccMix, delivery, new_order,
    payment, random,
};
use phasedb_workloads::{BenchResult, Workload};

fn seed() -> u64 {
    common::seed_or(0x7cc)
}

fn loaded<P: Protocol>(cfg: TpccConfig) -> (Tpcc, Database<P>) {
    let mut tpcc = Tpcc::new(cfg);
    let mut db = Database::<P>::open(Config::default());
    tpcc.setup(&mut db);
    (tpcc, db)
}

fn counts_match_the_spec(warehouses: u32) {
    let (tpcc, db) = loaded::<Occ>(TpccConfig {
        warehouses,
        ..TpccConfig::default()
    });
    let t = tpcc.tables();
    let w = warehouses as usize;
    let len = |table| db.table(table).len();
    let expect = [
        ("warehouse", t.warehouse, w),
        ("district", t.district, 10 * w),
        ("customer", t.customer, 30_000 * w),
        ("history", t.history, 30_000 * w),
        ("orders", t.order, 30_000 * w),
        ("new_order", t.new_order, 9_000 * w),
        ("item", t.item, 100_000),
        ("stock", t.stock, 100_000 * w),
        ("customer_last_name", t.customer_name, 30_000 * w),
        ("order_customer", t.order_customer, 30_000 * w),
    ];
    for (name, table, n) in expect {
        assert_eq!(len(table), n, "{name} rows with {warehouses} warehouses");
    }
    // 5 to 15 lines per order, 10 on average; condition 4 checks them exactly.
    let lines = len(t.order_line) - 1;
    assert!(
        (280_000 * w..320_000 * w).contains(&lines),
        "{lines} order lines"
    );
    assert_eq!(
        tpcc.check(&db),
        Ok(()),
        "{warehouses} warehouses after load"
    );
}

#[test]
fn load_one_warehouse_matches_the_spec() {
    counts_match_the_spec(1);
}

#[test]
fn load_two_warehouses_matches_the_spec() {
    counts_match_the_spec(2);
}

/// The last-name index finds the customer at position ceil(n / 2) by `C_FIRST` among all customers
/// of the district with that last name, found here by reading every customer.
#[test]
fn by_last_name_picks_the_middle_customer() {
    let (tpcc, db) = loaded::<Occ>(TpccConfig::default());
    let t = *tpcc.tables();
    use schema::customer::{C_FIRST, C_LAST};
    let everyone: Vec<(Vec<u8>, Vec<u8>, u32)> = db
        .execute(|tx| {
            let mut all = Vec::new();
            for c in 1..=schema::CUSTOMERS {
                let row = tx.get(t.customer, schema::customer_key(1, 3, c))?.unwrap();
                all.push((row.bytes(C_LAST).to_vec(), row.bytes(C_FIRST).to_vec(), c));
            }
            Ok(all)
        })
        .unwrap();
    let mut name = [0u8; 16];
    let mut scratch = Vec::new();
    for last in [0, 1, 371, 500, 999] {
        let len = random::last_name(last, &mut name);
        let mut same: Vec<_> = everyone
            .iter()
            .filter(|(l, _, _)| l[..] == name[..len])
            .collect();
        same.sort_by(|a, b| a.1.cmp(&b.1));
        assert!(
            !same.is_empty(),
            "customer {} has last name {last}",
            last + 1
        );
        let expected = same[same.len().div_ceil(2) - 1].2;
        let found = db
            .execute(|tx| customer::find(tx, &t, 1, 3, CustomerBy::LastName(last), &mut scratch))
            .unwrap();
        assert_eq!(found, expected, "last name {last}: {} matches", same.len());
    }
}

/// An order naming an unused item rolls back: a user abort, with nothing written.
#[test]
fn invalid_item_rolls_back_as_a_user_abort() {
    let (tpcc, db) = loaded::<Occ>(TpccConfig::default());
    let t = *tpcc.tables();
    let next_o_id = |db: &Database<Occ>| {
        db.execute(|tx| {
            let row = tx.get(t.district, schema::district_key(1, 4))?.unwrap();
            Ok(row.u64(schema::district::D_NEXT_O_ID))
        })
        .unwrap()
    };
    let mut input = new_order::Input {
        w_id: 1,
        d_id: 4,
        c_id: 42,
        ol_cnt: 3,
        all_local: true,
        entry_d: 1,
        ..Default::default()
    };
    for (n, i_id) in [7, 99, schema::ITEMS + 1].into_iter().enumerate() {
        input.lines[n] = new_order::Line {
            i_id,
            supply_w_id: 1,
            quantity: 5,
        };
    }
    let before = next_o_id(&db);
    let mut worker: Worker<'_, Occ> = db.worker();
    let r = worker.execute(NEW_ORDER, |tx| new_order::run(tx, &t, &input));
    assert!(matches!(r, Err(TxError::UserAbort)));
    assert_eq!(worker.stats().types[NEW_ORDER].user_aborts, 1);
    assert_eq!(worker.stats().types[NEW_ORDER].failures, 0);
    input.ol_cnt = 2;
    let out = worker
        .execute(NEW_ORDER, |tx| new_order::run(tx, &t, &input))
        .unwrap();
    assert_eq!(out.o_id as u64, before);
    drop(worker);
    assert_eq!(
        next_o_id(&db),
        before + 1,
        "only the valid order was entered"
    );
    assert_eq!(tpcc.check(&db), Ok(()));
}

/// A NewOrder reads W_TAX, D_TAX, D_NEXT_O_ID and the customer's discount; a Payment to the same
/// district by the same customer commits in the middle of it. Coarse rows make the NewOrder retry;
/// fine column groups keep the two apart.
fn new_order_conflicts_with_payment(fine: bool) -> u64 {
    let (tpcc, db) = loaded::<Occ>(TpccConfig {
        fine,
        ..TpccConfig::default()
    });
    let t = *tpcc.tables();
    let mut order = new_order::Input {
        w_id: 1,
        d_id: 1,
        c_id: 42,
        ol_cnt: 1,
        all_local: true,
        entry_d: 1,
        ..Default::default()
    };
    order.lines[0] = new_order::Line {
        i_id: 7,
        supply_w_id: 1,
        quantity: 3,
    };
    let pay = payment::Input {
        w_id: 1,
        d_id: 1,
        c_w_id: 1,
        c_d_id: 1,
        customer: CustomerBy::Id(42),
        amount: 1234,
        date: 1,
        history_key: 1 << 63,
    };
    let (paused, resume) = (Barrier::new(2), Barrier::new(2));
    let first_attempt = AtomicBool::new(true);
    let conflicts = std::thread::scope(|s| {
        s.spawn(|| {
            paused.wait();
            let mut scratch = Scratch::new();
            db.worker()
                .execute(PAYMENT, |tx| payment::run(tx, &t, &pay, &mut scratch))
                .unwrap();
            resume.wait();
        });
        let mut worker = db.worker();
        worker
            .execute(NEW_ORDER, |tx| {
                let out = new_order::run(tx, &t, &order)?;
                if first_attempt.swap(false, Ordering::Relaxed) {
                    paused.wait();
                    resume.wait();
                }
                Ok(out)
            })
            .unwrap();
        worker.stats().types[NEW_ORDER].conflicts
    });
    assert_eq!(tpcc.check(&db), Ok(()), "fine = {fine}");
    conflicts
}

#[test]
fn fine_groups_keep_new_order_and_payment_apart() {
    assert!(
        new_order_conflicts_with_payment(false) > 0,
        "coarse rows conflict"
    );
    assert_eq!(
        new_order_conflicts_with_payment(true),
        0,
        "fine groups do not"
    );
}

/// Reads column `col` of row `key`.
fn read(db: &Database<Occ>, table: TableId, key: u64, col: usize) -> u64 {
    db.execute(|tx| {
        let row = tx.get_columns(table, key, columns(&[col]))?.unwrap();
        Ok(row.u64(col))
    })
    .unwrap()
}

/// Adds `delta` to the I64 columns or U64 ids `(table, key, col, delta)`, all in one committed
/// transaction.
fn add(db: &Database<Occ>, changes: &[(TableId, u64, usize, i64)]) {
    db.execute(|tx| {
        for &(table, key, col, delta) in changes {
            let row = tx.get_columns(table, key, columns(&[col]))?.unwrap();
            let v = row.u64(col).wrapping_add(delta as u64);
            assert!(tx.update(table, key, |w| w.set_u64(col, v))?);
        }
        Ok(())
    })
    .unwrap();
}

/// The key of the history row of the one Payment a corruption test makes.
const HISTORY_KEY: u64 = 1 << 63;

/// Loads one warehouse with `mix` and commits one Payment of 12.34 by customer 42 of district 2 to
/// district 2, whose history row has key [`HISTORY_KEY`].
fn loaded_and_paid(mix: TpccMix) -> (Tpcc, Database<Occ>) {
    let (tpcc, db) = loaded::<Occ>(TpccConfig {
        mix,
        ..TpccConfig::default()
    });
    let t = *tpcc.tables();
    let pay = payment::Input {
        w_id: 1,
        d_id: 2,
        c_w_id: 1,
        c_d_id: 2,
        customer: CustomerBy::Id(42),
        amount: 1234,
        date: 1,
        history_key: HISTORY_KEY,
    };
    let mut scratch = Scratch::new();
    db.execute(|tx| payment::run(tx, &t, &pay, &mut scratch))
        .unwrap();
    assert_eq!(tpcc.check(&db), Ok(()), "after the payment");
    (tpcc, db)
}

/// Applies `changes`, expects the check to fail first on `condition` with every string of `place` in
/// the message, then undoes them and expects the check to pass again.
fn breaks(
    tpcc: &Tpcc,
    db: &Database<Occ>,
    changes: &[(TableId, u64, usize, i64)],
    condition: &str,
    place: &[&str],
) {
    add(db, changes);
    let err = tpcc.check(db).expect_err(condition);
    assert!(
        err.starts_with(&format!("{condition} (")),
        "expected {condition}: {err}"
    );
    for p in place {
        assert!(err.contains(p), "expected {p:?}: {err}");
    }
    let undo: Vec<_> = changes.iter().map(|&(t, k, c, d)| (t, k, c, -d)).collect();
    add(db, &undo);
    assert_eq!(tpcc.check(db), Ok(()), "{condition} restored");
}

/// Condition 8 (W_YTD = sum(H_AMOUNT)): a history amount changed (which breaks 9 and 10 as well, but
/// not 1), and W_YTD moved together with one D_YTD, which keeps condition 1.
#[test]
fn check_catches_condition_8() {
    let (tpcc, db) = loaded_and_paid(TpccMix::Standard);
    let t = *tpcc.tables();
    let amount = schema::history::H_AMOUNT;
    assert_eq!(read(&db, t.history, HISTORY_KEY, amount), 1234);
    let at = ["fails in warehouse 1:", "sum(H_AMOUNT) = "];
    breaks(
        &tpcc,
        &db,
        &[(t.history, HISTORY_KEY, amount, 1)],
        "condition 8",
        &at,
    );
    let both = [
        (
            t.warehouse,
            schema::warehouse_key(1),
            schema::warehouse::W_YTD,
            5,
        ),
        (
            t.district,
            schema::district_key(1, 7),
            schema::district::D_YTD,
            5,
        ),
    ];
    breaks(&tpcc, &db, &both, "condition 8", &at);
}

/// Conditions 2 and 4, on the orders the check gathers by walking the table: D_NEXT_O_ID moved
/// below the newest order, and one order's O_OL_CNT changed.
#[test]
fn check_catches_conditions_2_and_4() {
    let (tpcc, db) = loaded_and_paid(TpccMix::Standard);
    let t = *tpcc.tables();
    let next = schema::district::D_NEXT_O_ID;
    breaks(
        &tpcc,
        &db,
        &[(t.district, schema::district_key(1, 3), next, -1)],
        "condition 2",
        &["in warehouse 1 district 3:", "max(O_ID) = 3000"],
    );
    let ol_cnt = schema::order::O_OL_CNT;
    breaks(
        &tpcc,
        &db,
        &[(t.order, schema::order_key(1, 4, 17), ol_cnt, 1)],
        "condition 4",
        &["in warehouse 1 district 4:"],
    );
}

/// Condition 9 (D_YTD = sum(H_AMOUNT)): a history row moved to another district of its warehouse
/// (which keeps 8 and 10), and D_YTD moved from one district to another (which keeps 1 and 8).
#[test]
fn check_catches_condition_9() {
    let (tpcc, db) = loaded_and_paid(TpccMix::Standard);
    let t = *tpcc.tables();
    let d_id = schema::history::H_D_ID;
    let at = ["in warehouse 1 district 2:", "D_YTD = "];
    breaks(
        &tpcc,
        &db,
        &[(t.history, HISTORY_KEY, d_id, 1)],
        "condition 9",
        &at,
    );
    let moved = [
        (
            t.district,
            schema::district_key(1, 2),
            schema::district::D_YTD,
            100,
        ),
        (
            t.district,
            schema::district_key(1, 5),
            schema::district::D_YTD,
            -100,
        ),
    ];
    breaks(&tpcc, &db, &moved, "condition 9", &at);
}

/// Condition 10 (C_BALANCE = delivered OL_AMOUNT - sum(H_AMOUNT)): a history row given to another
/// customer of the district (which keeps 8, 9 and 12), and C_BALANCE and C_YTD_PAYMENT moved in
/// opposite directions (which keeps 12).
#[test]
fn check_catches_condition_10() {
    let (tpcc, db) = loaded_and_paid(TpccMix::Standard);
    let t = *tpcc.tables();
    let c_id = schema::history::H_C_ID;
    let at = ["in warehouse 1 district 2 customer 42:", "C_BALANCE = "];
    breaks(
        &tpcc,
        &db,
        &[(t.history, HISTORY_KEY, c_id, 1)],
        "condition 10",
        &at,
    );
    use schema::customer::{C_BALANCE, C_YTD_PAYMENT};
    let key = schema::customer_key(1, 9, 7);
    let moved = [
        (t.customer, key, C_BALANCE, 1),
        (t.customer, key, C_YTD_PAYMENT, -1),
    ];
    let at = ["in warehouse 1 district 9 customer 7:"];
    breaks(&tpcc, &db, &moved, "condition 10", &at);
}

/// Delivers the oldest undelivered order of each district of warehouse 1.
fn deliver(tpcc: &Tpcc, db: &Database<Occ>) -> delivery::Output {
    let t = *tpcc.tables();
    let input = delivery::Input {
        w_id: 1,
        carrier_id: 3,
        delivery_d: 1,
        first_o_id: [0; schema::DISTRICTS as usize],
    };
    db.execute(|tx| delivery::run(tx, &t, &input)).unwrap()
}

/// Condition 11 as the specification writes it ((count(*) from ORDER) - (count(*) from NEW-ORDER) =
/// 2100) holds until the first delivery: with a mix without Delivery, the check reports a delivery,
/// and only condition 11 (every other condition of the district is checked before it and holds).
#[test]
fn check_catches_condition_11_without_delivery_in_the_mix() {
    let (tpcc, db) = loaded_and_paid(TpccMix::NewOrderPayment);
    let out = deliver(&tpcc, &db);
    assert_eq!(
        out.o_ids,
        [schema::FIRST_NEW_ORDER; schema::DISTRICTS as usize]
    );
    let err = tpcc
        .check(&db)
        .expect_err("a delivery in a mix without Delivery");
    assert!(
        err.starts_with("condition 11 ((count(*) from ORDER) - (count(*) from NEW-ORDER) = 2100"),
        "{err}"
    );
    assert!(
        err.contains("in warehouse 1 district 1: 3000 - 899 = 2101"),
        "{err}"
    );
}

/// With Delivery in the mix, condition 11 counts the deliveries since the load (sum(C_DELIVERY_CNT)):
/// it holds after a delivery, and fails when a delivery count is off.
#[test]
fn check_catches_condition_11_with_delivery_in_the_mix() {
    let (tpcc, db) = loaded_and_paid(TpccMix::Standard);
    let t = *tpcc.tables();
    deliver(&tpcc, &db);
    assert_eq!(tpcc.check(&db), Ok(()), "after a delivery");
    let key = schema::customer_key(1, 4, 3000);
    let cnt = schema::customer::C_DELIVERY_CNT;
    let at = [
        "in warehouse 1 district 4:",
        "3000 - 899 = 2101, 2100 + 2 = 2102",
    ];
    let changes = [(t.customer, key, cnt, 1)];
    breaks(
        &tpcc,
        &db,
        &changes,
        "condition 11 counting deliveries",
        &at,
    );
}

fn run<P: Protocol>(cfg: TpccConfig, threads: usize, millis: u64, record: bool) -> BenchResult {
    common::run::<P, _>(&mut Tpcc::new(cfg), threads, millis, record, seed())
}

/// Every type committed, nothing failed, and about 1% of NewOrders rolled back by choice.
fn every_type_commits(r: &BenchResult, ctx: &str) {
    common::every_type_commits(r, ctx, &TXN_TYPES, NEW_ORDER);
    let no = &r.stats.types[NEW_ORDER];
    let share = no.user_aborts as f64 / (no.committed + no.user_aborts) as f64;
    eprintln!(
        "{ctx}: {} committed, {:.2}% conflicting attempts, {} of {} NewOrders rolled back",
        r.stats.total().committed,
        100.0 * r.stats.total().abort_rate(),
        no.user_aborts,
        no.committed + no.user_aborts
    );
    if no.committed >= 2000 {
        assert!(
            (0.002..0.03).contains(&share),
            "{ctx}: {:.2}% of NewOrders rolled back, expected about 1%",
            100.0 * share
        );
    }
}

/// A standard mix on one warehouse, every one of `threads` threads on it, for `millis` ms.
fn mix<P: Protocol>(fine: bool, threads: usize, millis: u64) {
    let ctx = format!(
        "{}, standard mix, fine = {fine}, {threads} threads, seed {}",
        P::NAME,
        seed()
    );
    let cfg = TpccConfig {
        fine,
        ..TpccConfig::default()
    };
    let r = common::long_enough(
        |ms| run::<P>(cfg.clone(), threads, ms, false),
        millis,
        TXN_TYPES.len(),
        &ctx,
    );
    every_type_commits(&r, &ctx);
}

#[test]
fn occ_coarse_mix_keeps_the_conditions() {
    mix::<Occ>(false, 4, 300);
}

#[test]
fn occ_fine_mix_keeps_the_conditions() {
    mix::<Occ>(true, 4, 300);
}

/// A short standard mix on 2 threads, coarse and fine.
fn mix_keeps_the_conditions<P: Protocol>() {
    for fine in [false, true] {
        mix::<P>(fine, 2, 150);
    }
}

#[test]
fn locking_protocols_keep_the_conditions() {
    mix_keeps_the_conditions::<TwoPlNoWait>();
    mix_keeps_the_conditions::<TwoPlWaitDie>();
    mix_keeps_the_conditions::<TwoPlBlocking>();
}

#[test]
fn tictoc_swisstm_and_adaptive_keep_the_conditions() {
    mix_keeps_the_conditions::<TicToc>();
    mix_keeps_the_conditions::<SwissTm>();
    mix_keeps_the_conditions::<Adaptive>();
}

#[test]
fn doppel_keeps_the_conditions() {
    mix_keeps_the_conditions::<Doppel>();
}

#[test]
fn nocc_one_thread_keeps_the_conditions() {
    let ctx = format!("nocc, standard mix, 1 thread, seed {}", seed());
    let r = common::long_enough(
        |ms| run::<NoCc>(TpccConfig::default(), 1, ms, false),
        200,
        TXN_TYPES.len(),
        &ctx,
    );
    every_type_commits(&r, &ctx);
    assert_eq!(r.stats.total().conflicts, 0, "{ctx}");
}

/// Two warehouses with remote items and payments, and the other mixes.
#[test]
fn occ_two_warehouses_and_other_mixes_keep_the_conditions() {
    let cfg = TpccConfig {
        warehouses: 2,
        mix: TpccMix::NewOrderPayment,
        remote_item_ratio: 0.1,
        remote_payment_ratio: 0.5,
        fine: true,
    };
    let r = run::<Occ>(cfg, 2, 200, false);
    assert_eq!(r.check, Ok(()), "no-p, 2 warehouses, seed {}", seed());
    let committed: Vec<u64> = r.stats.types.iter().map(|s| s.committed).collect();
    assert!(committed[0] > 0 && committed[1] > 0, "{committed:?}");
    assert!(committed.iter().skip(2).all(|&c| c == 0), "{committed:?}");
    let cfg = TpccConfig {
        mix: TpccMix::NewOrderPaymentOrderStatus,
        ..TpccConfig::default()
    };
    let r = run::<Occ>(cfg, 2, 150, false);
    assert_eq!(r.check, Ok(()), "no-p-os, seed {}", seed());
    let committed: Vec<u64> = r.stats.types.iter().map(|s| s.committed).collect();
    assert!(committed[..3].iter().all(|&c| c > 0), "{committed:?}");
    assert!(committed.iter().skip(3).all(|&c| c == 0), "{committed:?}");
}

#[test]
fn recorded_occ_run_is_serializable() {
    let ctx = format!("occ, recorded standard mix, 2 threads, seed {}", seed());
    let r = run::<Occ>(TpccConfig::default(), 2, 150, true);
    common::assert_recorded_serializable(&r, &ctx);
}

#[test]
fn config_and_mix_names() {
    assert_eq!(TpccConfig::default().validate(), Ok(()));
    for bad in [
        TpccConfig {
            warehouses: 0,
            ..TpccConfig::default()
        },
        TpccConfig {
            warehouses: 70_000,
            ..TpccConfig::default()
        },
        TpccConfig {
            remote_item_ratio: 1.5,
            ..TpccConfig::default()
        },
        TpccConfig {
            remote_payment_ratio: f64::NAN,
            ..TpccConfig::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    for mix in [
        TpccMix::Standard,
        TpccMix::NewOrderPayment,
        TpccMix::NewOrderPaymentOrderStatus,
    ] {
        assert_eq!(TpccMix::parse(mix.name()), Some(mix));
    }
    assert_eq!(TpccMix::parse("tpcc"), None);
    assert_eq!(TpccMix::Standard.weights(), [45, 43, 4, 4, 4]);
    assert_eq!(
        TpccMix::NewOrderPaymentOrderStatus.weights(),
        [45, 43, 4, 0, 0]
    );
    let _ = Tables::default();
}
