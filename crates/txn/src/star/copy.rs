//! Copying a partition to a restarted node (STAR §7.2, "each node that does not fail iterates
//! through the database and sends a portion of its database to the restarted node").
//!
//! The live replica walks a table one part at a time ([`Database::copy_part`]) and writes every
//! present column group of the rows it keeps as an upsert with the group's TID, in the replication
//! format (`format.rs`). The restarted node installs them with [`Database::install_copy`] under
//! the Thomas write rule per column group, so a copy and the replication stream that runs beside
//! it may arrive in any order: whichever carries the later version of a group wins.
//!
//! What it assumes: the source node's transactions do not hold locks across the copy (STAR's node
//! runs its transactions and the copy on one thread). A group locked anyway is left out of the
//! copy: its writer is committing it, and that write reaches the restarted node through the
//! replication stream, which replicates to it from the phase the recovery began. Rows loaded at
//! start carry TID 0, which replication records may not (`apply_replication` refuses it); the copy
//! allows it.

use phasedb_storage::TableId;

use crate::database::Database;
use crate::tid::{ABSENT, LOCK, UNLINKED, tid};

use super::Star;
use super::format::{ReplicationError, push_upsert};
use super::upsert::InstallRule;

impl Database<Star> {
    /// Parts table `t` is walked in by [`Database::copy_part`] (its index's shards).
    pub fn copy_parts(&self, t: TableId) -> usize {
        self.table(t).parts()
    }

    /// Appends to `buf`, as replication records, every present column group of the rows of part
    /// `part` of table `t` whose key passes `keep`, each with its TID. Returns the rows copied.
    pub fn copy_part(
        &self,
        t: TableId,
        part: usize,
        mut keep: impl FnMut(u64) -> bool,
        buf: &mut Vec<u8>,
    ) -> usize {
        let table = self.table(t);
        let (schema, layout) = (table.schema(), table.layout());
        let guard = phasedb_storage::pin();
        let mut found = Vec::new();
        // Gathered first: the part is locked against inserts while it is walked.
        table.for_each_in_part(part, &guard, |key, rec| {
            if keep(key) {
                found.push((key, rec));
            }
        });
        let mut row = vec![0u64; schema.row_words()];
        let mut rows = 0;
        for (key, rec) in found {
            let mut any = false;
            for (g, group) in schema.groups().iter().enumerate() {
                let out = &mut row[group.word..group.word + group.words];
                let Ok(word) = rec
                    .meta(layout, g)
                    .read_stable(|_| rec.copy_group(layout, g, out))
                else {
                    continue;
                };
                if word & (ABSENT | UNLINKED) != 0 {
                    continue;
                }
                push_upsert(buf, schema, t, key, tid(word), group.columns, &row);
                any = true;
            }
            rows += any as usize;
        }
        rows
    }

    /// Makes every row of table `t` whose key passes `keep` absent, at TID 0, so that any copy
    /// or replication record of it lands: what a restarted node that loaded its partitions as
    /// configured does before it copies them from live replicas (rows deleted since the load must
    /// not survive). Only while nothing else runs on the rows. Returns the rows forgotten.
    pub fn forget_rows(&self, t: TableId, mut keep: impl FnMut(u64) -> bool) -> usize {
        let table = self.table(t);
        let (schema, layout) = (table.schema(), table.layout());
        let guard = phasedb_storage::pin();
        let mut rows = 0;
        table.for_each(&guard, |key, rec| {
            if !keep(key) {
                return;
            }
            rows += 1;
            for g in 0..schema.groups().len() {
                let meta = rec.meta(layout, g);
                let word = meta.load();
                if word & LOCK == 0 && meta.try_lock(word) {
                    meta.publish(ABSENT);
                }
            }
        });
        rows
    }

    /// Installs the records of `bytes` (from [`Database::copy_part`]) with the Thomas write rule
    /// per column group: a group takes a record unless it holds a later TID, or is being unlinked
    /// (deleted by a later write). Records at TID 0 (rows as loaded) are accepted. The whole
    /// input is checked first; a malformed one changes nothing. Returns the records installed.
    pub fn install_copy(&self, bytes: &[u8]) -> Result<usize, ReplicationError> {
        Ok(self.upsert_rows(bytes, InstallRule::ByTid)?.groups)
    }
}
