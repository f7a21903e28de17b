//! What a Calvin participant asks of the engine (Thomson et al., SIGMOD 2012, §4.2): a dry run
//! that says which rows a transaction reads without changing anything, and remote reads installed
//! over a copy whatever versions it holds.

use phasedb_txn::{Occ, TxError, columns};

use crate::common::open;

#[test]
fn a_dry_run_reads_what_the_procedure_reads_and_changes_nothing() {
    let (db, t) = open::<Occ>(false, 10, 1);
    let mut w = db.worker();
    w.set_dry_run(true);
    let sum = w
        .execute(0, |tx| {
            let a = tx.get_columns(t, 3, columns(&[0]))?.unwrap().u64(0);
            let b = tx.get_columns(t, 7, columns(&[0]))?.unwrap().u64(0);
            tx.update(t, 3, |r| r.set_u64(0, a + b))?;
            // Key 5 is taken: a dry run's insert does not look (its reads may be stale).
            tx.insert(t, 5, |r| r.set_u64(0, 1))?;
            tx.insert(t, 42, |r| r.set_u64(0, 1))?;
            Ok(a + b)
        })
        .unwrap();
    assert_eq!(sum, 10);
    let mut read: Vec<u64> = w.prepared_reads().map(|r| r.1).collect();
    read.sort_unstable();
    read.dedup();
    assert_eq!(
        read,
        vec![3, 5, 7],
        "the rows read, and the one whose insert found it"
    );
    assert_eq!(w.stats().total().committed, 0, "a dry run is not a commit");
    w.set_dry_run(false);
    let (a3, missing) = db
        .execute(|tx| {
            let a3 = tx.get_columns(t, 3, columns(&[0]))?.unwrap().u64(0);
            Ok((a3, tx.get_columns(t, 42, columns(&[0]))?.is_none()))
        })
        .unwrap();
    assert_eq!(
        (a3, missing),
        (3, true),
        "nothing was installed or inserted"
    );
    assert!(
        w.take_history().txns.is_empty(),
        "a dry run records no history"
    );
    // The worker commits normally again, and a taken key is a duplicate again.
    assert!(matches!(
        w.execute(0, |tx| tx.insert(t, 5, |r| r.set_u64(0, 1))),
        Err(TxError::DuplicateKey { .. })
    ));
    w.execute(0, |tx| tx.update(t, 3, |r| r.set_u64(0, 30)))
        .unwrap();
    assert_eq!(w.stats().total().committed, 1);
}

#[test]
fn installed_rows_replace_a_copy_whatever_its_versions() {
    let (owner, t) = open::<Occ>(false, 4, 1);
    let (copy, _) = open::<Occ>(false, 4, 1);
    owner
        .execute(|tx| tx.update(t, 1, |r| r.set_u64(0, 100)))
        .unwrap();
    // The copy's own later writes give its row a TID above the owner's.
    for v in 0..5 {
        copy.execute(|tx| tx.update(t, 1, |r| r.set_u64(0, v)))
            .unwrap();
    }
    let mut rows = Vec::new();
    owner.read_rows([(t, 1), (t, 9)], None, &mut rows).unwrap();
    let cached = copy.cache_rows(&rows).unwrap();
    let value = |db: &phasedb_txn::Database<Occ>| {
        db.execute(|tx| Ok(tx.get_columns(t, 1, columns(&[0]))?.unwrap().u64(0)))
            .unwrap()
    };
    assert_eq!(
        (cached, value(&copy)),
        (1, 4),
        "the Thomas write rule keeps the copy's"
    );
    assert_eq!(
        copy.install_rows(&rows).unwrap(),
        1,
        "row 9 is absent: not sent"
    );
    assert_eq!(value(&copy), 100, "installed over it");
    assert!(copy.install_rows(&rows[..rows.len() - 1]).is_err());
    assert_eq!(value(&copy), 100, "a malformed batch changes nothing");
}
