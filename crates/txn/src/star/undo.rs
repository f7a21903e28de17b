//! Before-images of replication batches, so a node can take back what a failed node's batches
//! wrote in the phase its failure interrupted (STAR §7.2: "the system ... ignores all data
//! versions written in the current phase, since they have not been committed").
//!
//! The engine keeps one version per record, so the version from before the phase is kept where it
//! is needed: [`Database::apply_replication_keeping`] applies a batch like
//! [`Database::apply_replication`] and, right before each record lands, copies what the record can
//! change of its row into a [`BeforeImages`]; when the batch's sender fails before the phase ends,
//! the node puts those rows back ([`Database::restore`]).
//!
//! What is captured, and why it is enough:
//! - **Only the groups a record can change**: the groups holding its columns (an upsert), every
//!   group (a delete), and the groups found absent (an upsert of an absent row makes its other
//!   absent groups present, see `apply::revive`). A group no record of the batches wrote needs no
//!   restore; a row not linked at all is captured as such, and becomes absent again.
//! - **Each group once**: one `BeforeImages` collects the batches of one sender and phase, and
//!   holds the groups of each row it captured already; a later record of the same row captures
//!   only groups not captured yet. The first capture of a group is the one a restore needs (the
//!   version from before the sender's first write of it in the phase); in STAR a row has one
//!   writer in a phase (its partition's primary in the partitioned phase, the coordinator in the
//!   single-master phase), so nothing else changes a group between the sender's batches.
//! - **After the batch's check**: a malformed batch is refused before any record is applied or
//!   captured, and the decoding that applies the batch captures it (one check pass, one apply
//!   pass). Buffers are kept by [`BeforeImages::clear`], so a node that reuses its images
//!   captures without allocating once they have grown to a phase's size.
//!
//! Only the node's event-loop thread writes the rows involved while it captures and restores (see
//! above), and each group is locked while it is put back so optimistic readers never see a torn
//! row.

use std::sync::atomic::Ordering;

use phasedb_storage::{Guard, TableId};
use rustc_hash::FxHashMap;

use crate::database::Database;
use crate::star::Star;
use crate::tid::{ABSENT, LOCK};

use super::apply::Applied;
use super::format::{Record, RecordKind, ReplicationError};

/// The rows replication batches of one sender and phase changed, as they were before them: per
/// row, the groups its records could change, each as it was before the first of them.
#[derive(Debug, Default, Clone)]
pub struct BeforeImages {
    rows: Vec<Image>,
    /// Per group of every captured image, its metadata word then its words.
    words: Vec<u64>,
    /// Per captured row, the groups captured (all of them for a row that was not linked).
    captured: FxHashMap<(TableId, u64), u32>,
}

#[derive(Debug, Clone, Copy)]
struct Image {
    table: TableId,
    key: u64,
    /// Whether a record was linked under the key (else nothing is put back but absence).
    linked: bool,
    /// The groups captured, in group order from `start` (a linked row's).
    groups: u32,
    start: usize,
}

impl BeforeImages {
    /// Rows captured.
    pub fn len(&self) -> usize {
        self.captured.len()
    }

    /// Whether no row is captured.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Forgets every row, keeping the buffers.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.words.clear();
        self.captured.clear();
    }

    /// Copies the groups of record `r`'s row that `r` can change and that are not captured yet.
    fn capture(&mut self, db: &Database<Star>, r: &Record<'_>, guard: &Guard) {
        let table = db.table(r.table);
        let (schema, layout) = (table.schema(), table.layout());
        let all = schema.all_groups();
        let captured = self.captured.entry((r.table, r.key)).or_insert(0);
        if *captured == all {
            return;
        }
        let start = self.words.len();
        let Some(rec) = table.get(r.key, guard) else {
            // A row captured before is linked until a delete every group of it holds (captured
            // whole then) is unlinked: only a row seen for the first time is absent here.
            if *captured == 0 {
                *captured = all;
                self.rows.push(Image {
                    table: r.table,
                    key: r.key,
                    linked: false,
                    groups: all,
                    start,
                });
            }
            return;
        };
        let changed = match r.kind {
            RecordKind::Delete => all,
            RecordKind::Upsert => {
                let absent = |groups: u32| {
                    let mut found = 0;
                    let mut m = groups;
                    while m != 0 {
                        let g = m.trailing_zeros() as usize;
                        m &= m - 1;
                        if rec.meta(layout, g).load() & ABSENT != 0 {
                            found |= 1 << g;
                        }
                    }
                    found
                };
                // An upsert changes groups it does not carry only when it finds one it carries
                // absent and revives the row (`apply::revive`): only then are the others read.
                let carried = schema.groups_of(r.columns);
                if absent(carried) != 0 {
                    carried | absent(all & !carried)
                } else {
                    carried
                }
            }
        };
        let groups = changed & !*captured;
        if groups == 0 {
            return;
        }
        *captured |= groups;
        let mut m = groups;
        while m != 0 {
            let g = m.trailing_zeros() as usize;
            m &= m - 1;
            self.words.push(rec.meta(layout, g).load() & !LOCK);
            self.words.extend(
                rec.group_words(layout, g)
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed)),
            );
        }
        self.rows.push(Image {
            table: r.table,
            key: r.key,
            linked: true,
            groups,
            start,
        });
    }
}

impl Database<Star> {
    /// [`Database::apply_replication`] that first adds to `images` what each record can change of
    /// its row, unless `images` holds it already (see the module doc). A refused batch applies and
    /// captures nothing.
    pub fn apply_replication_keeping(
        &self,
        bytes: &[u8],
        images: &mut BeforeImages,
    ) -> Result<Applied, ReplicationError> {
        self.apply_replication_with(bytes, |r, guard| images.capture(self, r, guard))
    }

    /// Puts back every group of `images`, the last captured first. A row that was not linked
    /// becomes absent. Returns the row images put back (a row whose groups were first written by
    /// different batches has one image per such batch).
    pub fn restore(&self, images: &BeforeImages) -> usize {
        let guard = phasedb_storage::pin();
        let mut restored = 0;
        for img in images.rows.iter().rev() {
            let table = self.table(img.table);
            let layout = table.layout();
            let Some(rec) = table.get(img.key, &guard) else {
                continue;
            };
            let mut at = img.start;
            let mut m = img.groups;
            while m != 0 {
                let g = m.trailing_zeros() as usize;
                m &= m - 1;
                let meta = rec.meta(layout, g);
                let words = rec.group_words(layout, g);
                let before = if img.linked {
                    let w = images.words[at];
                    let data = &images.words[at + 1..at + 1 + words.len()];
                    at += 1 + words.len();
                    Some((w, data))
                } else {
                    None
                };
                loop {
                    let current = meta.load();
                    if current & LOCK != 0 {
                        std::hint::spin_loop();
                        continue;
                    }
                    if !meta.try_lock(current) {
                        continue;
                    }
                    std::sync::atomic::fence(Ordering::Release);
                    match before {
                        Some((word, data)) => {
                            for (w, &v) in words.iter().zip(data) {
                                w.store(v, Ordering::Relaxed);
                            }
                            meta.publish(word);
                        }
                        None => meta.publish(ABSENT),
                    }
                    break;
                }
            }
            restored += 1;
        }
        restored
    }
}

#[cfg(test)]
mod tests {
    use phasedb_storage::{ColumnType, Schema, TableSpec};

    use super::*;
    use crate::database::Config;
    use crate::star::format::{push_delete, push_upsert};
    use crate::tid::EPOCH_SHIFT;

    /// Columns of the test table, one per group.
    const A: usize = 0;
    const B: usize = 1;
    const C: usize = 2;

    /// A database with table `kv` of three groups of one U64 each; rows 1 and 2 loaded.
    fn db() -> (Database<Star>, TableId, Schema) {
        let mut db = Database::<Star>::open(Config::default());
        let schema = Schema::builder()
            .column("a", ColumnType::U64, 0)
            .column("b", ColumnType::U64, 1)
            .column("c", ColumnType::U64, 2)
            .build()
            .unwrap();
        let kv = db.create_table(TableSpec::new("kv", schema.clone(), 16));
        for k in 1..=2 {
            db.load(kv, k, |r| {
                r.set_u64(A, 100 * k);
                r.set_u64(B, 100 * k + 1);
                r.set_u64(C, 100 * k + 2);
            })
            .unwrap();
        }
        (db, kv, schema)
    }

    /// A TID of the phase under test, `n`-th of it.
    fn tid(n: u64) -> u64 {
        (3 << EPOCH_SHIFT) | n
    }

    /// A batch of one upsert of `key` setting each of `values` (column, value) at `tid`.
    fn upsert(schema: &Schema, t: TableId, key: u64, tid: u64, values: &[(usize, u64)]) -> Vec<u8> {
        let mut row = vec![0u64; schema.row_words()];
        let mut columns = 0;
        for &(c, v) in values {
            row[schema.column(c).offset / 8] = v;
            columns |= 1 << c;
        }
        let mut buf = Vec::new();
        push_upsert(&mut buf, schema, t, key, tid, columns, &row);
        buf
    }

    /// Per group of row `key`, its TID word then its words; `None` if no record is linked.
    fn raw(db: &Database<Star>, t: TableId, key: u64) -> Option<Vec<u64>> {
        let table = db.table(t);
        let guard = phasedb_storage::pin();
        let rec = table.get(key, &guard)?;
        let mut out = Vec::new();
        for g in 0..table.schema().groups().len() {
            out.push(rec.meta(table.layout(), g).load());
            out.extend(
                rec.group_words(table.layout(), g)
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed)),
            );
        }
        Some(out)
    }

    /// The row as a transaction reads it.
    fn read(db: &Database<Star>, t: TableId, key: u64) -> Option<[u64; 3]> {
        db.execute(|tx| Ok(tx.get(t, key)?.map(|r| [r.u64(A), r.u64(B), r.u64(C)])))
            .unwrap()
    }

    #[test]
    fn a_batch_captures_and_restores_only_the_groups_it_writes() {
        let (db, kv, schema) = db();
        let mut batch = upsert(&schema, kv, 1, tid(1), &[(B, 7)]);
        batch.extend(upsert(&schema, kv, 3, tid(2), &[(A, 8)]));
        let mut images = BeforeImages::default();
        let applied = db.apply_replication_keeping(&batch, &mut images).unwrap();
        assert_eq!(applied.records, 2);
        assert_eq!(images.len(), 2);
        let groups: Vec<_> = images
            .rows
            .iter()
            .map(|i| (i.key, i.linked, i.groups))
            .collect();
        assert_eq!(groups, [(1, true, 0b010), (3, false, 0b111)]);
        assert_eq!(
            images.words.len(),
            2,
            "row 1's group B: its word and its one column"
        );
        assert_eq!(read(&db, kv, 1), Some([100, 7, 102]));
        assert_eq!(read(&db, kv, 3), Some([8, 0, 0]));

        // Another writer's change of group A (not in the batch) stays through the restore.
        db.apply_replication(&upsert(&schema, kv, 1, tid(3), &[(A, 9)]))
            .unwrap();
        assert_eq!(db.restore(&images), 2);
        assert_eq!(read(&db, kv, 1), Some([9, 101, 102]));
        assert_eq!(
            read(&db, kv, 3),
            None,
            "a row the batch inserted is absent again"
        );
    }

    #[test]
    fn restoring_several_batches_gives_back_the_rows_from_before_the_first() {
        let (db, kv, schema) = db();
        let before: Vec<_> = (1..=2).map(|k| raw(&db, kv, k)).collect();
        let mut delete = Vec::new();
        push_delete(&mut delete, kv, 2, tid(3));
        let batches = [
            upsert(&schema, kv, 1, tid(1), &[(A, 11)]),
            upsert(&schema, kv, 1, tid(2), &[(A, 12), (C, 13)]),
            delete,
            // Revives row 2: B and C become present again, zero.
            upsert(&schema, kv, 2, tid(4), &[(A, 21)]),
            upsert(&schema, kv, 4, tid(5), &[(B, 41)]),
            upsert(&schema, kv, 4, tid(6), &[(C, 42)]),
            upsert(&schema, kv, 1, tid(7), &[(B, 14)]),
        ];
        let mut images = BeforeImages::default();
        for batch in &batches {
            db.apply_replication_keeping(batch, &mut images).unwrap();
        }
        assert_eq!(read(&db, kv, 1), Some([12, 14, 13]));
        assert_eq!(read(&db, kv, 2), Some([21, 0, 0]));
        assert_eq!(read(&db, kv, 4), Some([0, 41, 42]));
        // Row 1: A, then C, then B, each once; row 2 whole at the delete; row 4 as absent.
        let groups: Vec<_> = images.rows.iter().map(|i| (i.key, i.groups)).collect();
        assert_eq!(
            groups,
            [(1, 0b001), (1, 0b100), (2, 0b111), (4, 0b111), (1, 0b010)]
        );

        db.restore(&images);
        let after: Vec<_> = (1..=2).map(|k| raw(&db, kv, k)).collect();
        assert_eq!(
            after, before,
            "every word and TID as before the first batch"
        );
        assert_eq!(read(&db, kv, 4), None);

        // Cleared images capture afresh.
        images.clear();
        assert!(images.is_empty());
        db.apply_replication_keeping(&batches[0], &mut images)
            .unwrap();
        assert_eq!(images.len(), 1);
    }

    #[test]
    fn a_refused_batch_applies_and_captures_nothing() {
        let (db, kv, schema) = db();
        let mut batch = upsert(&schema, kv, 1, tid(1), &[(B, 7)]);
        let cut = batch.len() - 1;
        batch.extend(upsert(&schema, kv, 2, tid(2), &[(B, 8)]));
        batch.truncate(batch.len() - 1);
        let mut images = BeforeImages::default();
        assert!(db.apply_replication_keeping(&batch, &mut images).is_err());
        assert!(
            db.apply_replication_keeping(&batch[..cut], &mut images)
                .is_err()
        );
        assert!(images.is_empty());
        assert_eq!(read(&db, kv, 1), Some([100, 101, 102]));
        assert_eq!(read(&db, kv, 2), Some([200, 201, 202]));
    }
}
