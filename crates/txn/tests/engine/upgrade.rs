//! Lock upgrades under two-phase locking: two transactions that each read a row and then update it
//! form a certain deadlock, which must be detected as one rather than waited out; commutative
//! updates take their write lock without upgrading.

use std::sync::Barrier;

use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{
    CONFLICT_KINDS, Config, Conflict, Database, Protocol, SplitOp, TableId, TwoPlBlocking,
    TwoPlNoWait, TwoPlWaitDie, Worker, columns,
};

const ROUNDS: usize = 20;

/// Runs `body` on two threads, each with its own worker, against one counter (row 0, starting at
/// 0); returns the counter's final value and the conflicts by cause over both threads.
fn on_two_threads<P: Protocol>(
    body: impl Fn(&mut Worker<'_, P>, TableId) + Sync,
) -> (i64, Vec<(Conflict, u64)>) {
    let mut db = Database::<P>::open(Config::default());
    let schema = Schema::builder()
        .column("n", ColumnType::I64, 0)
        .build()
        .unwrap();
    let t = db.create_table(TableSpec::new("t", schema, 16));
    db.load(t, 0, |r| r.set_i64(0, 0)).unwrap();
    let mut kinds = [0u64; CONFLICT_KINDS.len()];
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut w = db.worker();
                    body(&mut w, t);
                    w.stats().total().conflict_kinds
                })
            })
            .collect();
        for th in threads {
            for (k, n) in kinds.iter_mut().zip(th.join().unwrap()) {
                *k += n;
            }
        }
    });
    let n = db.execute(|tx| Ok(tx.get(t, 0)?.unwrap().i64(0))).unwrap();
    (n, CONFLICT_KINDS.iter().copied().zip(kinds).collect())
}

/// `ROUNDS` rounds in which two threads both read the counter before either increments it.
fn upgrade_races<P: Protocol>() -> (i64, Vec<(Conflict, u64)>) {
    let (round, both_read) = (Barrier::new(2), Barrier::new(2));
    on_two_threads::<P>(|w, t| {
        for _ in 0..ROUNDS {
            // A thread still retrying the last round must not meet the other's read.
            round.wait();
            let mut first = true;
            w.execute(0, |tx| {
                let n = tx.get_columns(t, 0, columns(&[0]))?.unwrap().i64(0);
                if std::mem::take(&mut first) {
                    both_read.wait();
                }
                tx.update(t, 0, |r| r.set_i64(0, n + 1))?;
                Ok(())
            })
            .unwrap();
        }
    })
}

fn count(kinds: &[(Conflict, u64)], c: Conflict) -> u64 {
    kinds.iter().find(|(k, _)| *k == c).map_or(0, |(_, n)| *n)
}

#[test]
fn blocking_2pl_detects_upgrade_cycles() {
    let (n, kinds) = upgrade_races::<TwoPlBlocking>();
    assert_eq!(n, 2 * ROUNDS as i64, "every increment commits once");
    // Each round both threads hold the shared lock before either upgrades. The first to upgrade
    // takes the exclusive lock and waits for the other's shared lock to go; the other must find
    // it taken and abort as a deadlock instead of waiting out the timeout.
    assert!(
        count(&kinds, Conflict::Deadlock) >= 1,
        "no upgrade cycle was detected as a deadlock: {kinds:?}"
    );
}

#[test]
fn wait_die_and_no_wait_2pl_survive_upgrade_races() {
    for (n, kinds) in [
        upgrade_races::<TwoPlWaitDie>(),
        upgrade_races::<TwoPlNoWait>(),
    ] {
        assert_eq!(n, 2 * ROUNDS as i64, "every increment commits once");
        assert_eq!(count(&kinds, Conflict::LockTimeout), 0, "{kinds:?}");
    }
}

/// A commutative update under locking takes the row's write lock at once: its existence check does
/// not share-lock the row first, so two of them on one row never meet as upgrades.
#[test]
fn commutes_under_2pl_do_not_upgrade() {
    let per_thread = 20_000;
    let start = Barrier::new(2);
    let (n, kinds) = on_two_threads::<TwoPlBlocking>(|w, t| {
        start.wait();
        for _ in 0..per_thread {
            w.execute(0, |tx| tx.commute(t, 0, 0, SplitOp::Add(1)).map(|_| ()))
                .unwrap();
        }
    });
    assert_eq!(n, 2 * per_thread);
    assert_eq!(count(&kinds, Conflict::Deadlock), 0, "{kinds:?}");
}
