//! The workloads' stored procedures as a partitioned deployment sees them (`phasedb_txn::Procedures`),
//! for YCSB and TPC-C over 3 partitions: `touched` names exactly the partitions whose records a
//! committed run read or wrote (found in its recorded history), home first; the cross-partition share
//! follows the requested one; the consistency checks pass after the runs; a node that loads only some
//! partitions holds exactly their rows and its check passes; and requests survive postcard unchanged.
//!
//! `PHASEDB_SEED=<seed>` reruns with another seed.

use std::collections::{BTreeSet, HashMap};

use phasedb_txn::{Config, Database, Occ, PartitionId, Procedures, TableId, TxError};
use phasedb_workloads::tpcc::{
    NEW_ORDER, PAYMENT, ProceduresMix, TpccProcedures, TpccProceduresConfig, TpccRequest, new_order,
};
use phasedb_workloads::ycsb::{OPS, YcsbProcedures, YcsbProceduresConfig, YcsbRequest};

use crate::common;

fn seed() -> u64 {
    common::seed_or(0x57a2)
}

const PARTITIONS: u32 = 3;

fn ycsb() -> YcsbProcedures {
    let cfg = YcsbProceduresConfig {
        rows_per_partition: 1000,
        ..YcsbProceduresConfig::star(PARTITIONS)
    };
    assert_eq!(cfg.validate(), Ok(()));
    YcsbProcedures::new(cfg)
}

fn tpcc() -> TpccProcedures {
    let cfg = TpccProceduresConfig {
        warehouses: PARTITIONS,
        mix: ProceduresMix::NewOrderPayment,
        fine: false,
    };
    assert_eq!(cfg.validate(), Ok(()));
    TpccProcedures::new(cfg)
}

/// A database with `w`'s tables, partitions `held` loaded (in parallel) and the shared rows.
fn loaded<W: Procedures>(w: &mut W, held: &[PartitionId], record: bool) -> Database<Occ> {
    let mut db = Database::<Occ>::open(Config {
        record_history: record,
        ..Config::default()
    });
    w.create_tables(&mut db);
    let (w, db_ref) = (&*w, &db);
    std::thread::scope(|s| {
        s.spawn(move || w.load_shared(db_ref));
        for &p in held {
            s.spawn(move || w.load_partition(db_ref, p));
        }
    });
    db
}

/// What runs of generated requests showed.
#[derive(Default, Debug)]
struct Outcome {
    requests: usize,
    cross: usize,
    committed: usize,
    user_aborts: usize,
    /// Requests per transaction type.
    types: HashMap<usize, usize>,
}

/// Generates `per_home` requests for each home partition with cross-partition probability `cross`
/// on generator `index` (generators need distinct indexes: TPC-C numbers its history rows with it)
/// and runs each on one worker of `db` (which records its history). For every committed one, the
/// partitions of the records it read and wrote (rows of shared tables aside) are exactly those
/// `touched` names, whose first is the home.
fn run_and_compare<W>(
    w: &W,
    db: &Database<Occ>,
    index: usize,
    cross: f64,
    per_home: usize,
    ctx: &str,
) -> Outcome
where
    W: Procedures,
    W::Request: std::fmt::Debug,
{
    // A history item names its table and column group (`phasedb_txn::item`); map it back.
    let mut table_of = HashMap::new();
    for t in 0..db.tables().len() as TableId {
        for group in 0..16 {
            table_of.insert(phasedb_txn::item(t, group, 0).table, t);
        }
    }
    let mut worker = db.worker();
    let mut g = w.generator(index, seed());
    let mut out = Outcome::default();
    for home in 0..w.partitions() {
        for n in 0..per_home {
            let req = w.generate(&mut g, home, cross);
            let touched = w.touched(&req);
            let at = format!("{ctx}, cross {cross}, home {home}, request {n}: {req:?}");
            assert_eq!(touched.first(), home, "{at}");
            out.requests += 1;
            out.cross += touched.is_cross() as usize;
            *out.types.entry(w.txn_type(&req)).or_default() += 1;
            match w.run(&req, &mut worker) {
                Ok(()) => out.committed += 1,
                Err(TxError::UserAbort) => {
                    out.user_aborts += 1;
                    assert!(worker.take_history().is_empty(), "{at}");
                    continue;
                }
                Err(e) => panic!("{at}: {e}"),
            }
            let history = worker.take_history();
            assert_eq!(history.len(), 1, "{at}");
            let txn = &history.txns[0];
            let items = txn.reads.iter().map(|r| r.item);
            let items = items.chain(txn.writes.iter().map(|w| w.item));
            let seen: BTreeSet<PartitionId> = items
                .filter_map(|item| w.partition_of(table_of[&item.table], item.key))
                .collect();
            let named: BTreeSet<PartitionId> = touched.as_slice().iter().copied().collect();
            assert_eq!(seen, named, "{at}");
        }
    }
    out
}

/// The observed cross-partition share is the requested one: exactly for 0 and 1, within 0.08 of
/// it otherwise (at 600 requests, about four standard deviations).
fn assert_cross_share(out: &Outcome, cross: f64, ctx: &str) {
    let share = out.cross as f64 / out.requests as f64;
    eprintln!("{ctx}: cross {cross}: {out:?}, share {share:.3}");
    if cross == 0.0 || cross == 1.0 {
        assert_eq!(share, cross, "{ctx}");
    } else {
        assert!(
            (share - cross).abs() < 0.08,
            "{ctx}: share {share}, asked {cross}"
        );
    }
}

const ALL: [PartitionId; 3] = [0, 1, 2];

#[test]
fn ycsb_touched_is_exactly_the_partitions_a_request_reads_and_writes() {
    let ctx = format!("ycsb, seed {}", seed());
    let mut w = ycsb();
    let db = loaded(&mut w, &ALL, true);
    assert_eq!(w.txn_types(), ["ycsb"]);
    for (index, cross) in [0.0, 0.3, 1.0].into_iter().enumerate() {
        let out = run_and_compare(&w, &db, index, cross, 200, &ctx);
        assert_cross_share(&out, cross, &ctx);
        assert_eq!(out.committed, out.requests, "{ctx}");
    }
    assert_eq!(w.check(&db, &ALL), Ok(()), "{ctx}");
}

/// A YCSB request has distinct keys; a cross-partition one takes half of them from its home and half
/// from one other partition, chosen uniformly; about 10% of operations write.
#[test]
fn ycsb_requests_split_their_keys_between_two_partitions() {
    let ctx = format!("ycsb, seed {}", seed());
    let w = ycsb();
    let mut g = w.generator(1, seed());
    let mut others = [0usize; PARTITIONS as usize];
    let (mut ops, mut writes) = (0, 0);
    for n in 0..3000 {
        let home = n % PARTITIONS;
        let req = w.generate(&mut g, home, 1.0);
        let keys: BTreeSet<u64> = req.ops.iter().map(|o| o.key).collect();
        assert_eq!(keys.len(), OPS, "{ctx}: {req:?}");
        let parts: Vec<PartitionId> = req.ops.iter().map(|o| w.partition_of_key(o.key)).collect();
        let other = parts[OPS - 1];
        assert_ne!(other, home, "{ctx}: {req:?}");
        assert_eq!(
            parts.iter().filter(|&&p| p == home).count(),
            OPS / 2,
            "{ctx}"
        );
        assert_eq!(
            parts.iter().filter(|&&p| p == other).count(),
            OPS / 2,
            "{ctx}"
        );
        assert_eq!(w.touched(&req).as_slice(), [home, other], "{ctx}");
        others[other as usize] += (home == 0) as usize;
        ops += OPS;
        writes += req.ops.iter().filter(|o| o.write).count();
        let local = w.generate(&mut g, home, 0.0);
        assert!(local.ops.iter().all(|o| w.partition_of_key(o.key) == home));
    }
    // Home 0's other partition is 1 or 2, about 500 times each.
    assert_eq!(others[0], 0, "{ctx}");
    assert!(others[1] > 400 && others[2] > 400, "{ctx}: {others:?}");
    let share = writes as f64 / ops as f64;
    assert!((0.08..0.12).contains(&share), "{ctx}: write share {share}");
}

#[test]
fn tpcc_touched_is_exactly_the_partitions_a_request_reads_and_writes() {
    let ctx = format!("tpcc, seed {}", seed());
    let mut w = tpcc();
    let db = loaded(&mut w, &ALL, true);
    assert_eq!(w.txn_types(), ["new-order", "payment"]);
    let mut new_orders = 0;
    let mut user_aborts = 0;
    for (index, cross) in [0.0, 0.3, 1.0].into_iter().enumerate() {
        let out = run_and_compare(&w, &db, index, cross, 200, &ctx);
        assert_cross_share(&out, cross, &ctx);
        assert!(
            out.types[&NEW_ORDER] > 200 && out.types[&PAYMENT] > 200,
            "{ctx}: {out:?}"
        );
        new_orders += out.types[&NEW_ORDER];
        user_aborts += out.user_aborts;
    }
    // TPC-C's 1% of NewOrders naming an unused item roll back (about 9 of 900 here).
    assert!(
        user_aborts > 0 && user_aborts * 100 < new_orders * 4,
        "{ctx}: {user_aborts} of {new_orders} NewOrders rolled back"
    );
    assert_eq!(w.check(&db, &ALL), Ok(()), "{ctx}");
    // Checked on some warehouses only (condition 10, which needs every warehouse's history, aside).
    assert_eq!(w.check(&db, &[2]), Ok(()), "{ctx}");
}

/// The mixes run only their transactions, and every cross-partition NewOrder has at least one line
/// supplied by its one other warehouse, every cross-partition Payment a customer of it.
#[test]
fn tpcc_mixes_and_cross_partition_requests_have_their_shape() {
    let ctx = format!("tpcc, seed {}", seed());
    for (mix, only) in [
        (ProceduresMix::NewOrder, NEW_ORDER),
        (ProceduresMix::Payment, PAYMENT),
    ] {
        assert_eq!(ProceduresMix::parse(mix.name()), Some(mix));
        let w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: PARTITIONS,
            mix,
            fine: false,
        });
        let mut g = w.generator(2, seed());
        for n in 0..600 {
            let home = n % PARTITIONS;
            let req = w.generate(&mut g, home, if n % 2 == 0 { 1.0 } else { 0.0 });
            assert_eq!(w.txn_type(&req), only, "{ctx}: {req:?}");
            let touched = w.touched(&req);
            assert_eq!(touched.is_cross(), n % 2 == 0, "{ctx}: {req:?}");
            let w_id = TpccProcedures::warehouse(home);
            match &req {
                TpccRequest::NewOrder(input) => {
                    assert_eq!(input.w_id, w_id);
                    let lines = &input.lines[..input.ol_cnt];
                    let remote: Vec<u32> = lines
                        .iter()
                        .map(|l| l.supply_w_id)
                        .filter(|&s| s != w_id)
                        .collect();
                    assert_eq!(remote.len(), touched.is_cross() as usize, "{ctx}: {req:?}");
                    assert_eq!(input.all_local, remote.is_empty(), "{ctx}: {req:?}");
                }
                TpccRequest::Payment(input) => {
                    assert_eq!(input.w_id, w_id);
                    assert_eq!(input.c_w_id != w_id, touched.is_cross(), "{ctx}: {req:?}");
                    if !touched.is_cross() {
                        assert_eq!(input.c_d_id, input.d_id, "{ctx}: {req:?}");
                    }
                }
            }
        }
    }
    assert_eq!(
        ProceduresMix::parse("no-p"),
        Some(ProceduresMix::NewOrderPayment)
    );
    assert_eq!(ProceduresMix::parse("standard"), None);
    // With one warehouse nothing can be cross-partition.
    let w = TpccProcedures::new(TpccProceduresConfig::default());
    let mut g = w.generator(0, seed());
    assert!((0..100).all(|_| !w.touched(&w.generate(&mut g, 0, 1.0)).is_cross()));
}

/// The rows of every table of `db`, counted by partition (`None`: rows of shared tables).
fn rows_by_partition<W: Procedures>(
    w: &W,
    db: &Database<Occ>,
) -> HashMap<Option<PartitionId>, u64> {
    let mut rows = HashMap::new();
    for t in 0..db.tables().len() as TableId {
        db.for_each_row_quiescent(t, |key, _| {
            *rows.entry(w.partition_of(t, key)).or_default() += 1;
        });
    }
    rows
}

#[test]
fn ycsb_partial_load_holds_exactly_its_partitions() {
    let ctx = format!("ycsb, seed {}", seed());
    let mut w = ycsb();
    let db = loaded(&mut w, &[0, 2], false);
    let rows = rows_by_partition(&w, &db);
    assert_eq!(rows, HashMap::from([(Some(0), 1000), (Some(2), 1000)]));
    assert_eq!(w.check(&db, &[0, 2]), Ok(()));
    let err = w.check(&db, &[1]).expect_err("partition 1 is not loaded");
    assert!(err.contains("partition 1 of usertable has 0 rows"), "{err}");
    // Its single-partition requests run on it.
    let mut worker = db.worker();
    let mut g = w.generator(0, seed());
    for n in 0..500 {
        let req = w.generate(&mut g, if n % 2 == 0 { 0 } else { 2 }, 0.0);
        w.run(&req, &mut worker)
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    }
    drop(worker);
    assert_eq!(w.check(&db, &[0, 2]), Ok(()), "{ctx}");
}

#[test]
fn tpcc_partial_load_holds_exactly_its_warehouses() {
    let ctx = format!("tpcc, seed {}", seed());
    let mut w = tpcc();
    let db = loaded(&mut w, &[1], false);
    let rows = rows_by_partition(&w, &db);
    let keys: BTreeSet<_> = rows.keys().copied().collect();
    assert_eq!(keys, BTreeSet::from([None, Some(1)]), "{rows:?}");
    assert_eq!(rows[&None], 100_000, "the items");
    let t = *w.tables();
    let per_warehouse = [
        ("warehouse", t.warehouse, 1),
        ("district", t.district, 10),
        ("customer", t.customer, 30_000),
        ("history", t.history, 30_000),
        ("orders", t.order, 30_000),
        ("new_order", t.new_order, 9_000),
        ("stock", t.stock, 100_000),
        ("customer_last_name", t.customer_name, 30_000),
        ("order_customer", t.order_customer, 30_000),
    ];
    for (name, table, n) in per_warehouse {
        assert_eq!(db.table(table).len(), n, "{name}");
        db.for_each_row_quiescent(table, |key, _| {
            assert_eq!(w.partition_of(table, key), Some(1), "{name} row {key:#x}");
        });
    }
    assert_eq!(w.check(&db, &[1]), Ok(()));
    let err = w.check(&db, &[0]).expect_err("warehouse 1 is not loaded");
    assert!(err.contains("warehouse 1"), "{err}");
    // Its single-partition requests run on it, and keep the conditions.
    let mut worker = db.worker();
    let mut g = w.generator(0, seed());
    for _ in 0..500 {
        let req = w.generate(&mut g, 1, 0.0);
        match w.run(&req, &mut worker) {
            Ok(()) | Err(TxError::UserAbort) => {}
            Err(e) => panic!("{ctx}: {req:?}: {e}"),
        }
    }
    drop(worker);
    assert_eq!(w.check(&db, &[1]), Ok(()), "{ctx}");
}

/// Encodes `req` with postcard and decodes it back; returns the encoded size.
fn round_trip<R>(req: &R) -> usize
where
    R: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = postcard::to_stdvec(req).expect("encodes");
    let back: R = postcard::from_bytes(&bytes).expect("decodes");
    assert_eq!(&back, req);
    // A cut message is an error, not a panic or a different request.
    assert!(postcard::from_bytes::<R>(&bytes[..bytes.len() - 1]).is_err());
    bytes.len()
}

#[test]
fn requests_round_trip_through_postcard() {
    let (y, t) = (ycsb(), tpcc());
    let (mut yg, mut tg) = (y.generator(3, seed()), t.generator(3, seed()));
    let (mut ycsb_max, mut tpcc_max) = (0, 0);
    for n in 0..2000 {
        let (home, cross) = (n % PARTITIONS, [0.0, 0.5, 1.0][n as usize % 3]);
        ycsb_max = ycsb_max.max(round_trip::<YcsbRequest>(&y.generate(&mut yg, home, cross)));
        tpcc_max = tpcc_max.max(round_trip::<TpccRequest>(&t.generate(&mut tg, home, cross)));
    }
    eprintln!("largest encoded requests: YCSB {ycsb_max} B, TPC-C {tpcc_max} B");
    // Varints: 4 keys and flags, and a NewOrder's 15 lines of up to 6 bytes plus its header.
    assert!(ycsb_max <= 4 * 4 + 3, "{ycsb_max}");
    assert!(tpcc_max <= 15 * 6 + 30, "{tpcc_max}");
    // A NewOrder claiming more lines than it can hold is refused when decoded.
    let input = new_order::Input {
        ol_cnt: 15,
        ..Default::default()
    };
    let mut bytes = postcard::to_stdvec(&TpccRequest::NewOrder(input)).unwrap();
    let at = bytes.iter().position(|&b| b == 15).expect("the line count");
    bytes[at] = 16;
    let err = postcard::from_bytes::<TpccRequest>(&bytes).expect_err("16 lines");
    eprintln!("16 lines: {err}");
}
