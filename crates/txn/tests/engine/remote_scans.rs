//! What a remote scan of Dist-OCC and Dist-S2PL asks of the engine (STAR §8.1.2): the owner
//! names the rows a key range holds, and a home replaces its cached copy of the range with the
//! owner's rows, so a row deleted at the owner does not linger in the home's scans.

use phasedb_txn::{Database, Occ, TableId, columns};

use crate::common::open;

/// The keys and first columns a scan of `lo..=hi` sees.
fn scan(db: &Database<Occ>, t: TableId, lo: u64, hi: u64) -> Vec<(u64, u64)> {
    db.execute(|tx| {
        let mut seen = Vec::new();
        tx.scan(t, lo, hi, usize::MAX, columns(&[0]), |k, row| {
            seen.push((k, row.u64(0)));
            true
        })?;
        Ok(seen)
    })
    .unwrap()
}

#[test]
fn a_range_names_its_present_rows_and_a_home_takes_the_owners_range_whole() {
    let (owner, t) = open::<Occ>(false, 20, 2);
    let (home, _) = open::<Occ>(false, 20, 2);
    owner
        .execute(|tx| {
            tx.delete(t, 4)?;
            tx.insert(t, 5, |r| r.set_u64(0, 55))?;
            tx.update(t, 6, |r| r.set_u64(0, 66))
        })
        .unwrap();
    let mut keys = Vec::new();
    assert!(owner.range_keys(t, 3, 9, &mut keys));
    assert_eq!(keys, vec![5, 6, 8], "the deleted row is not named");

    let mut rows = Vec::new();
    owner
        .read_rows(keys.iter().map(|&k| (t, k)), None, &mut rows)
        .unwrap();
    home.cache_rows(&rows).unwrap();
    assert_eq!(
        scan(&home, t, 3, 9),
        vec![(4, 4), (5, 55), (6, 66), (8, 8)],
        "cached over the old copy, the row deleted at the owner is still seen"
    );
    assert_eq!(
        home.forget_range(t, 3, 9),
        4,
        "the rows linked in the range"
    );
    home.cache_rows(&rows).unwrap();
    assert_eq!(scan(&home, t, 3, 9), vec![(5, 55), (6, 66), (8, 8)]);
    let keys_seen: Vec<u64> = scan(&home, t, 0, 19).into_iter().map(|r| r.0).collect();
    assert_eq!(
        keys_seen,
        vec![0, 2, 5, 6, 8, 10, 12, 14, 16, 18],
        "rows outside the range are untouched"
    );

    keys.clear();
    assert!(!owner.range_keys(t, 9, 3, &mut keys), "an empty range");
    assert!(!owner.range_keys(99, 0, 1, &mut keys), "no such table");
    assert!(keys.is_empty());
    assert_eq!(home.forget_range(99, 0, 1), 0);
}
