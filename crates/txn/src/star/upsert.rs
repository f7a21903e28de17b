//! Installing rows that carry their column groups' TIDs (a partition copy, `copy.rs`, the rows a
//! Dist-* home fetched and the values a Calvin participant was sent, `remote.rs`): each carried
//! group is written only if the record's group does not hold a later version (the Thomas write
//! rule) unless the rows are known to be their owner's current values, and is locked while it is
//! written.

use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{InsertOutcome, TableId};

use crate::database::Database;
use crate::protocol::Protocol;
use crate::tid::{ABSENT, LOCK, TidWord, UNLINKED, tid};

use super::apply::unpack;
use super::format::{Decoder, RecordKind, ReplicationError};

/// Which incoming versions a record's groups take.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum InstallRule {
    /// By TID, a group marked absent (deleted) like any other: a later delete wins over an earlier
    /// copy.
    ByTid,
    /// By TID, but a group marked absent is always filled: the rows are a cache of another node's
    /// partition, never deleted here.
    Fill,
    /// Every carried group, whatever its TID: the rows are their owner's current values, and this
    /// node's copy carries TIDs of its own writes to it, not comparable with the owner's.
    Overwrite,
}

/// What [`Database::upsert_rows`] did.
pub(super) struct Upserted {
    /// Upsert records read.
    pub rows: usize,
    /// Column groups written.
    pub groups: usize,
}

impl<P: Protocol<Meta = TidWord>> Database<P> {
    /// Installs the upserts of `bytes` (replication format, TID 0 allowed) per column group as
    /// `rule` says; the whole batch is decoded first, so a malformed one changes nothing.
    pub(super) fn upsert_rows(
        &self,
        bytes: &[u8],
        rule: InstallRule,
    ) -> Result<Upserted, ReplicationError> {
        let schema_of = |t: TableId| self.tables().get(t as usize).map(|t| t.schema());
        Decoder::new(bytes, schema_of)
            .with_zero_tids()
            .try_for_each(|r| r.map(|_| ()))?;
        let guard = phasedb_storage::pin();
        let mut row = Vec::new();
        let mut done = Upserted { rows: 0, groups: 0 };
        for r in Decoder::new(bytes, schema_of).with_zero_tids().flatten() {
            if r.kind != RecordKind::Upsert {
                continue;
            }
            done.rows += 1;
            let table = self.table(r.table);
            let (schema, layout) = (table.schema(), table.layout());
            row.resize(schema.row_words(), 0);
            unpack(schema, r.columns, r.data, &mut row);
            let carried = schema.groups_of(r.columns);
            let (rec, fresh) = match table.insert_with(r.key, &guard, |_| TidWord::new(LOCK), None)
            {
                InsertOutcome::Inserted(rec) => (rec, true),
                InsertOutcome::Exists(rec) => (rec, false),
            };
            for (g, group) in schema.groups().iter().enumerate() {
                let meta = rec.meta(layout, g);
                let carried = carried & (1 << g) != 0;
                if fresh {
                    fence(Ordering::Release);
                    if carried {
                        rec.install_columns(layout, schema, group.columns, &row);
                        meta.publish(r.tid);
                        done.groups += 1;
                    } else {
                        // Filled by the row's other records (one per group).
                        meta.publish(ABSENT);
                    }
                    continue;
                }
                if !carried {
                    continue;
                }
                // An equal TID is the same write (or a group revived at TID 0 with zero columns
                // by a replication record that created the row): installing it again is harmless.
                let word = meta.load();
                let later = match rule {
                    InstallRule::ByTid => tid(word) > r.tid,
                    InstallRule::Fill => tid(word) > r.tid && word & ABSENT == 0,
                    InstallRule::Overwrite => false,
                };
                if word & (LOCK | UNLINKED) != 0 || later {
                    continue;
                }
                if meta.try_lock(word) {
                    fence(Ordering::Release);
                    rec.install_columns(layout, schema, group.columns, &row);
                    meta.publish(r.tid);
                    done.groups += 1;
                }
            }
        }
        Ok(done)
    }
}
