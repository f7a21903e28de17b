//! TPC-C: the initial population matches the specification, the consistency conditions hold after
//! load and after concurrent runs, every transaction type commits, NewOrder's invalid items roll back
//! as user aborts, and a recorded run is serializable.
//!
//! Runs are timed, so a seed fixes what each thread generates but not the interleaving; a failure
//! names the seed and `PHASEDB_SEED=<seed>` reruns with it.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};

use phasedb_txn::{Config, Database, NoCc, Occ, Protocol, TxError, Worker};
use phasedb_workloads::tpcc::customer::{self, CustomerBy};
use phasedb_workloads::tpcc::schema::{self, Tables};
use phasedb_workloads::tpcc::{
    NEW_ORDER, PAYMENT, Scratch, TXN_TYPES, Tpcc, TpccConfig, TpccMix, new_order, payment, random,
};
use phasedb_workloads::{BenchResult, Workload};

mod common;

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

fn occ_mix(fine: bool) {
    let ctx = format!(
        "occ, standard mix, fine = {fine}, 4 threads, seed {}",
        seed()
    );
    let r = run::<Occ>(
        TpccConfig {
            fine,
            ..TpccConfig::default()
        },
        4,
        300,
        false,
    );
    every_type_commits(&r, &ctx);
}

#[test]
fn occ_coarse_mix_keeps_the_conditions() {
    occ_mix(false);
}

#[test]
fn occ_fine_mix_keeps_the_conditions() {
    occ_mix(true);
}

#[test]
fn nocc_one_thread_keeps_the_conditions() {
    let ctx = format!("nocc, standard mix, 1 thread, seed {}", seed());
    let r = run::<NoCc>(TpccConfig::default(), 1, 200, false);
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
