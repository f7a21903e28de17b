//! RUBiS: the load satisfies the consistency conditions and the check catches broken metadata, both
//! mixes keep the conditions on every protocol with every transaction type committing, the mixes
//! have the paper's shape, and recorded contended runs are serializable under OCC and Doppel.
//!
//! Runs are timed, so a seed fixes what each thread generates but not the interleaving; a failure
//! names the seed and `PHASEDB_SEED=<seed>` reruns with it.

use crate::common;
use std::time::Duration;

use phasedb_txn::{
    Adaptive, Config, Database, Doppel, Occ, Protocol, SwissTm, TicToc, TwoPlBlocking, TwoPlNoWait,
    TwoPlWaitDie, columns,
};
use phasedb_workloads::rubis::schema::{self, bids, bids_by_user, items, users};
use phasedb_workloads::rubis::{
    REGISTER_USER, Rubis, RubisConfig, RubisMix, STORE_BID, STORE_BUY_NOW, STORE_COMMENT,
    STORE_ITEM, TXN_TYPES,
};
use phasedb_workloads::{BenchOptions, BenchResult, Workload, run_bench};

fn seed() -> u64 {
    common::seed_or(0x5ab15)
}

/// A small population that loads in milliseconds.
fn small(mix: RubisMix) -> RubisConfig {
    RubisConfig {
        users: 3_000,
        items: 1_000,
        bids_per_item: 3,
        mix,
        ..RubisConfig::default()
    }
}

fn loaded(cfg: RubisConfig) -> (Rubis, Database<Occ>) {
    let mut rubis = Rubis::new(cfg);
    let mut db = Database::<Occ>::open(Config::default());
    rubis.setup(&mut db);
    (rubis, db)
}

fn run<P: Protocol>(cfg: RubisConfig, millis: u64, record: bool) -> BenchResult {
    common::run::<P, _>(&mut Rubis::new(cfg), 2, millis, record, seed())
}

#[test]
fn load_matches_the_config_and_keeps_the_conditions() {
    let cfg = small(RubisMix::Bidding);
    let (rubis, db) = loaded(cfg.clone());
    let t = rubis.tables();
    let len = |table| db.table(table).len() as u64;
    let expect = [
        ("users", t.users, cfg.users),
        ("nicknames", t.nicknames, cfg.users),
        ("items", t.items, cfg.items),
        ("items_by_seller", t.items_by_seller, cfg.items),
        ("categories", t.categories, cfg.categories),
        ("regions", t.regions, cfg.regions),
        ("bids", t.bids, cfg.items * cfg.bids_per_item as u64),
        (
            "bids_by_user",
            t.bids_by_user,
            cfg.items * cfg.bids_per_item as u64,
        ),
        (
            "comments",
            t.comments,
            cfg.items * cfg.comments_per_item as u64,
        ),
        ("buy_now", t.buy_now, 0),
    ];
    for (name, table, n) in expect {
        assert_eq!(len(table), n, "{name} rows");
    }
    assert_eq!(rubis.check(&db), Ok(()), "after load");
}

/// Each kind of broken metadata is caught: a bid count, a maximum, a rating and a top-K set.
#[test]
fn check_catches_inconsistent_metadata() {
    let (rubis, db) = loaded(small(RubisMix::Bidding));
    let t = *rubis.tables();
    let read_i64 = |table, key, col| {
        db.execute(|tx| {
            Ok(tx
                .get_columns(table, key, columns(&[col]))?
                .unwrap()
                .i64(col))
        })
        .unwrap()
    };
    let set_i64 = |table, key, col, v: i64| {
        db.execute(|tx| tx.update(table, key, |w| w.set_i64(col, v)))
            .unwrap();
    };
    for (what, table, key, col, needle) in [
        ("nb_of_bids", t.items, 7, items::NB_OF_BIDS, "nb_of_bids"),
        ("max_bid", t.items, 8, items::MAX_BID, "max_bid"),
        ("rating", t.users, 9, users::RATING, "rating"),
    ] {
        let v = read_i64(table, key, col);
        set_i64(table, key, col, v + 1);
        let err = rubis.check(&db).expect_err(what);
        assert!(err.contains(needle), "{what}: {err}");
        set_i64(table, key, col, v);
        assert_eq!(rubis.check(&db), Ok(()), "{what} restored");
    }
    // A bids_by_user entry for a bid that does not exist; then for an existing bid of another user.
    let (bid, bidder, item) = {
        let mut first = None;
        db.for_each_row_quiescent(t.bids, |id, row| {
            first.get_or_insert((id, row.u64(bids::USER), row.u64(bids::ITEM)));
        });
        first.expect("the load placed bids")
    };
    for (user, row) in [(bidder, 999_999), (bidder + 1, bid)] {
        let key = schema::user_row_key(user, row);
        db.execute(|tx| tx.insert(t.bids_by_user, key, |w| w.set_u64(bids_by_user::ITEM, item)))
            .unwrap();
        let err = rubis
            .check(&db)
            .expect_err("a bids_by_user entry for no bid");
        assert!(err.contains("bids_by_user names bid"), "{err}");
        db.execute(|tx| tx.delete(t.bids_by_user, key)).unwrap();
        assert_eq!(rubis.check(&db), Ok(()), "bids_by_user restored");
    }
    db.execute(|tx| {
        let id = 1_000_000u64;
        tx.topk_insert(
            t.categories,
            1,
            schema::named::NEW_ITEMS,
            id as i64,
            &id.to_le_bytes(),
        )
    })
    .unwrap();
    let err = rubis
        .check(&db)
        .expect_err("a listed item that does not exist");
    assert!(err.contains("category 1"), "{err}");
}

#[test]
fn mixes_have_the_papers_shape() {
    let writes = [
        STORE_BID,
        STORE_COMMENT,
        STORE_ITEM,
        STORE_BUY_NOW,
        REGISTER_USER,
    ];
    let b = RubisMix::Bidding.weights();
    let share = |w: &[u32; 17], tys: &[usize]| {
        tys.iter().map(|&i| w[i]).sum::<u32>() as f64 / w.iter().sum::<u32>() as f64
    };
    assert!(b.iter().all(|&w| w > 0), "{b:?}");
    let write_share = share(&b, &writes);
    assert!(
        (0.12..=0.16).contains(&write_share),
        "RUBiS-B writes {write_share}"
    );
    let c = RubisMix::Contended.weights();
    assert_eq!(share(&c, &[STORE_BID]), 0.5, "RUBiS-C bids");
    for ty in 1..TXN_TYPES.len() {
        assert_eq!(
            c[ty], b[ty],
            "{} keeps its bidding-mix weight",
            TXN_TYPES[ty]
        );
    }
    assert_eq!(RubisMix::parse("c"), Some(RubisMix::Contended));
    assert_eq!(
        RubisMix::parse(RubisMix::Bidding.name()),
        Some(RubisMix::Bidding)
    );
    assert_eq!(RubisMix::parse("a"), None);
}

#[test]
fn config_errors_are_clear() {
    assert_eq!(RubisConfig::default().validate(), Ok(()));
    let bad = [
        (
            RubisConfig {
                users: 1,
                ..RubisConfig::default()
            },
            "--users",
        ),
        (
            RubisConfig {
                items: 0,
                ..RubisConfig::default()
            },
            "--items",
        ),
        (
            RubisConfig {
                categories: 0,
                ..RubisConfig::default()
            },
            "--categories",
        ),
        (
            RubisConfig {
                regions: 20_000,
                ..RubisConfig::default()
            },
            "--regions",
        ),
        (
            RubisConfig {
                bids_per_item: 5_000,
                ..RubisConfig::default()
            },
            "--bids-per-item",
        ),
        (
            RubisConfig {
                comments_per_item: 500,
                ..RubisConfig::default()
            },
            "--comments-per-item",
        ),
        (
            RubisConfig {
                alpha: 10.0,
                ..RubisConfig::default()
            },
            "--alpha",
        ),
        (
            RubisConfig {
                alpha: -0.5,
                ..RubisConfig::default()
            },
            "--alpha",
        ),
    ];
    for (cfg, flag) in bad {
        let err = cfg.validate().expect_err(flag);
        assert!(err.starts_with(flag), "{flag}: {err}");
    }
    // The harmonic skew is a point of the rubis experiment.
    let harmonic = RubisConfig {
        alpha: 1.0,
        ..RubisConfig::default()
    };
    assert_eq!(harmonic.validate(), Ok(()));
}

/// Every type committed, none failed, and only StoreBuyNow (sold out) rolled back by choice.
fn every_type_commits(r: &BenchResult, ctx: &str) {
    common::every_type_commits(r, ctx, &TXN_TYPES, STORE_BUY_NOW);
    eprintln!(
        "{ctx}: {} committed, {:.2}% conflicting attempts",
        r.stats.total().committed,
        100.0 * r.stats.total().abort_rate()
    );
}

fn both_mixes<P: Protocol>() -> Vec<BenchResult> {
    [RubisMix::Bidding, RubisMix::Contended]
        .into_iter()
        .map(|mix| {
            let ctx = format!(
                "{}, RUBiS-{}, 2 threads, seed {}",
                P::NAME,
                mix.name(),
                seed()
            );
            let r = common::long_enough(
                |ms| run::<P>(small(mix), ms, false),
                300,
                TXN_TYPES.len(),
                &ctx,
            );
            every_type_commits(&r, &ctx);
            r
        })
        .collect()
}

#[test]
fn occ_keeps_the_conditions() {
    both_mixes::<Occ>();
}

#[test]
fn blocking_2pl_keeps_the_conditions() {
    both_mixes::<TwoPlBlocking>();
}

#[test]
fn tictoc_keeps_the_conditions() {
    both_mixes::<TicToc>();
}

#[test]
fn doppel_keeps_the_conditions() {
    both_mixes::<Doppel>();
}

/// On RUBiS-C Doppel splits the hot items' metadata and applies bids to per-core slices, and the
/// rewritten StoreBid, StoreComment and StoreItem (Figure 7), which read none of the split data,
/// are never stashed. Splitting is made eager (one sampled conflict suffices) because two threads
/// on a shared machine conflict rarely.
#[test]
fn doppel_splits_hot_items_and_never_stashes_the_rewritten_writes() {
    let mut rubis = Rubis::new(small(RubisMix::Contended));
    let mut config = Config::default();
    config.split.min_conflicts = 1;
    let opts = BenchOptions {
        threads: 2,
        warmup: Duration::from_millis(50),
        duration: Duration::from_millis(400),
        seed: seed(),
        durable_results: false,
        durable_progress: false,
        config,
    };
    let r = run_bench::<Doppel, _>(&mut rubis, &opts, |_, _| {});
    let ctx = format!("doppel, RUBiS-C, seed {}: {:?}", seed(), r.protocol_report);
    assert_eq!(r.check, Ok(()), "{ctx}");
    let slice_ops: u64 = r
        .protocol_report
        .iter()
        .find(|(name, _)| *name == "operations on per-core slices")
        .map(|(_, v)| v.parse().expect("a count"))
        .expect("doppel reports its slice operations");
    assert!(slice_ops > 0, "{ctx}");
    for ty in [STORE_BID, STORE_COMMENT, STORE_ITEM] {
        assert_eq!(
            r.stats.types[ty].stashed, 0,
            "{} stashed; {ctx}",
            TXN_TYPES[ty]
        );
    }
}

#[test]
fn other_protocols_keep_the_conditions() {
    both_mixes::<TwoPlNoWait>();
    both_mixes::<TwoPlWaitDie>();
    both_mixes::<SwissTm>();
    both_mixes::<Adaptive>();
}

fn recorded_contended_run_is_serializable<P: Protocol>() {
    let ctx = format!("{}, recorded RUBiS-C, 2 threads, seed {}", P::NAME, seed());
    let r = run::<P>(small(RubisMix::Contended), 150, true);
    common::assert_recorded_serializable(&r, &ctx);
}

#[test]
fn recorded_occ_run_is_serializable() {
    recorded_contended_run_is_serializable::<Occ>();
}

#[test]
fn recorded_doppel_run_is_serializable() {
    recorded_contended_run_is_serializable::<Doppel>();
}
