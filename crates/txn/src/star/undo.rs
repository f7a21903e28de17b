//! Before-images of replication batches, so a node can take back what a failed node's batches
//! wrote in the phase its failure interrupted (STAR §7.2: "the system ... ignores all data
//! versions written in the current phase, since they have not been committed").
//!
//! The engine keeps one version per record, so the version from before the phase is kept where it
//! is needed: before a node applies a batch it copies the rows the batch touches
//! ([`Database::before_images`]); when the batch's sender fails before the phase ends, the node
//! puts those rows back, newest batch first ([`Database::restore`]). Only the node's event-loop
//! thread writes the rows involved while it does (in STAR's partitioned phase a partition has one
//! writer, its primary; in the single-master phase only the coordinator writes), and each group is
//! locked while it is put back so optimistic readers never see a torn row.

use std::sync::atomic::Ordering;

use phasedb_storage::TableId;

use crate::database::Database;
use crate::star::Star;
use crate::tid::{ABSENT, LOCK};

use super::format::{Decoder, ReplicationError};

/// The rows one or more replication batches touched, as they were before them.
#[derive(Debug, Default, Clone)]
pub struct BeforeImages {
    rows: Vec<Image>,
    /// Per group of every captured row, its metadata word then its words.
    words: Vec<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Image {
    table: TableId,
    key: u64,
    /// Whether a record was linked under the key (else nothing is put back but absence).
    linked: bool,
    start: usize,
}

impl BeforeImages {
    /// Rows captured.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row is captured.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Forgets every row, keeping the buffers.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.words.clear();
    }
}

impl Database<Star> {
    /// Appends to `out` the current image of every row batch `bytes` touches (a malformed batch
    /// is refused and nothing is captured). Call it right before applying the batch.
    pub fn before_images(
        &self,
        bytes: &[u8],
        out: &mut BeforeImages,
    ) -> Result<(), ReplicationError> {
        let schema_of = |t: TableId| self.tables.get(t as usize).map(|t| t.schema());
        for record in Decoder::new(bytes, schema_of) {
            record?;
        }
        let guard = phasedb_storage::pin();
        for r in Decoder::new(bytes, schema_of).flatten() {
            let table = self.table(r.table);
            let layout = table.layout();
            let start = out.words.len();
            let rec = table.get(r.key, &guard);
            if let Some(rec) = rec {
                for g in 0..table.schema().groups().len() {
                    out.words.push(rec.meta(layout, g).load() & !LOCK);
                    out.words.extend(
                        rec.group_words(layout, g)
                            .iter()
                            .map(|w| w.load(Ordering::Relaxed)),
                    );
                }
            }
            out.rows.push(Image {
                table: r.table,
                key: r.key,
                linked: rec.is_some(),
                start,
            });
        }
        Ok(())
    }

    /// Puts back every row of `images`, the last captured first, so each row ends as it was
    /// before the first batch captured. A row that was not linked becomes absent. Returns the
    /// rows put back.
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
            for g in 0..table.schema().groups().len() {
                let meta = rec.meta(layout, g);
                let words = rec.group_words(layout, g);
                let before = if img.linked {
                    let w = images.words[at];
                    at += 1;
                    Some((w, &images.words[at..at + words.len()]))
                } else {
                    None
                };
                at += before.map_or(0, |(_, d)| d.len());
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
