//! Applying replication records on a secondary with the Thomas write rule (STAR §5.2, §7.2).

use std::collections::VecDeque;
use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{Guard, InsertOutcome, RecordPtr, RowBuf, Schema, Table, TableId};

use crate::commit::placeholder_word;
use crate::database::Database;
use crate::protocol::Protocol;
use crate::state::Unlink;
use crate::tid::{ABSENT, LOCK, TidMeta, TidWord, UNLINKED, tid};

use super::format::{Decoder, Record, RecordKind, ReplicationError, column_runs};

/// What applying one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Records in the batch.
    pub records: usize,
    /// Column groups that took a record's columns (or its delete): the record's TID was above the
    /// group's.
    pub applied_groups: usize,
    /// Column groups that refused a record: they already held its TID or a later one.
    pub skipped_groups: usize,
    /// Records left partly unapplied because a group stayed locked past [`HELD_LOCK_SPINS`]: a
    /// lock held across messages (a prepared transaction of Dist-OCC or Dist-S2PL waiting for its
    /// votes on this very thread) that the caller must let go before it applies the batch again.
    /// Applying again is safe: the Thomas write rule skips what was applied.
    pub blocked: usize,
}

/// Spins a record waits on a locked group before [`Applied::blocked`] gives it back to the
/// caller, without ever yielding the core. A committing writer's install releases its lock within
/// them; a lock that stays is held by a transaction waiting on something only the caller can
/// deliver (its own prepared transaction), or by a writer the scheduler took off its core. Waiting
/// longer helps neither: on a loaded machine a wait of thousands of yields per record stalled a
/// node for seconds while its own prepared transactions kept the locks.
pub const HELD_LOCK_SPINS: u32 = 64;

impl<P: Protocol<Meta = TidWord>> Database<P> {
    /// Decodes a batch of replication records (the blocks [`crate::Worker::write_replication`]
    /// wrote; format in [`crate::star`]) and applies each with the Thomas write rule: each column
    /// group of the record's row takes the carried columns only if the record's TID is above the
    /// group's current TID, so records of the single-master phase may arrive in any order and
    /// replicas still converge on the newest version of every group (§5.2). An upsert of an absent
    /// row inserts it, its other columns zero until a record carries them (their groups keep the
    /// TIDs they had, so such a record still lands); a delete leaves the row absent with the
    /// delete's TID, so a late older write is still refused. Workers unlink the tombstones deletes
    /// leave, like those of transactions, once the epoch has moved on (STAR moves it at the phase
    /// switch, after the replication fence).
    ///
    /// The whole batch is checked before anything is applied: a malformed, truncated or oversized
    /// batch (unknown table, key or TID out of range, columns beyond the schema, missing bytes) is
    /// refused with an error and changes nothing. It never panics, whatever the bytes.
    ///
    /// Each group is locked (the TID word's LOCK bit) while it is installed, so optimistic readers
    /// never see a torn row, and several threads may apply batches at once. Applying is not a
    /// transaction and records no history: the rows keep their writers' TIDs, so a transaction that
    /// later reads one records the original writer's version, as on the primary.
    pub fn apply_replication(&self, bytes: &[u8]) -> Result<Applied, ReplicationError> {
        self.apply_replication_with(bytes, |_, _| {})
    }

    /// [`Database::apply_replication`] that calls `before(record, guard)` right before it applies
    /// each record, once the whole batch was checked (never for a refused batch).
    pub(crate) fn apply_replication_with(
        &self,
        bytes: &[u8],
        mut before: impl FnMut(&Record<'_>, &Guard),
    ) -> Result<Applied, ReplicationError> {
        let schema_of = |t: TableId| self.tables.get(t as usize).map(|t| t.schema());
        let mut out = Applied::default();
        for record in Decoder::new(bytes, schema_of) {
            record?;
            out.records += 1;
        }
        if out.records == 0 {
            return Ok(out);
        }
        let guard = phasedb_storage::pin();
        let mut row = vec![0u64; self.max_row_words()];
        let mut tombstones = VecDeque::new();
        // A record's index slot and row are mostly not in the cache (a secondary touches rows
        // only when records arrive), so the records are decoded AHEAD ahead of the one applied:
        // a record's slot is prefetched when it is decoded, its row half way (the slot is there
        // by then), and both have arrived when it is applied.
        let mut records = Decoder::new(bytes, schema_of).flatten();
        let mut ring: [Option<Record<'_>>; AHEAD] = [None; AHEAD];
        let (mut decoded, mut done) = (0, 0);
        loop {
            while decoded < done + AHEAD {
                let Some(r) = records.next() else { break };
                self.table(r.table).prefetch_slot(r.key, &guard);
                ring[decoded % AHEAD] = Some(r);
                decoded += 1;
            }
            if let Some(r) = ring[(done + AHEAD / 2) % AHEAD].filter(|_| done + AHEAD / 2 < decoded)
            {
                let table = self.table(r.table);
                match r.kind {
                    RecordKind::Upsert => table.prefetch_record_columns(r.key, &guard, r.columns),
                    RecordKind::Delete => table.prefetch_record(r.key, &guard),
                }
            }
            let Some(record) = ring[done % AHEAD].take() else {
                break;
            };
            done += 1;
            before(&record, &guard);
            apply_record(self, &record, &guard, &mut row, &mut out, &mut tombstones);
        }
        self.adopt_limbo(&mut tombstones);
        Ok(out)
    }
}

/// Records [`Database::apply_replication`] decodes ahead of the one it applies (a power of two).
const AHEAD: usize = 8;

/// Applies one checked record; `row` is scratch for its columns.
pub(crate) fn apply_record<P: Protocol>(
    db: &Database<P>,
    r: &Record<'_>,
    guard: &Guard,
    row: &mut [u64],
    out: &mut Applied,
    tombstones: &mut VecDeque<Unlink>,
) {
    let table = db.table(r.table);
    let schema = table.schema();
    let groups = match r.kind {
        RecordKind::Delete => schema.all_groups(),
        RecordKind::Upsert => {
            unpack(schema, r.columns, r.data, &mut row[..schema.row_words()]);
            schema.groups_of(r.columns)
        }
    };
    let mut spins = 0u32;
    loop {
        let rec = match table.get(r.key, guard) {
            Some(rec) => rec,
            None => match insert_placeholder(db, table, r, guard) {
                Linked::New(rec, initial) => {
                    install_fresh(table, r, rec, initial, groups, row, out);
                    note_tombstone(db, table, r, rec, tombstones);
                    return;
                }
                Linked::Existing(rec) => rec,
            },
        };
        match install(table, r, rec, groups, row) {
            Installed::Done { applied, skipped } => {
                out.applied_groups += applied;
                out.skipped_groups += skipped;
                if r.kind == RecordKind::Delete && applied > 0 {
                    note_tombstone(db, table, r, rec, tombstones);
                }
                return;
            }
            Installed::Blocked { applied, skipped } => {
                out.applied_groups += applied;
                out.skipped_groups += skipped;
                out.blocked += 1;
                return;
            }
            // The record is being unlinked: look the key up again once it is gone.
            Installed::Unlinked => backoff(&mut spins),
        }
    }
}

/// The record [`insert_placeholder`] found under a key.
enum Linked<M> {
    /// Linked by this call, with its groups' initial word (they are locked).
    New(RecordPtr<M>, u64),
    /// Linked already.
    Existing(RecordPtr<M>),
}

/// Links a new record for `r.key`, every group locked and absent with the key's last known version
/// (kept while histories are recorded), unless one is linked.
fn insert_placeholder<P: Protocol>(
    db: &Database<P>,
    table: &Table<P::Meta>,
    r: &Record<'_>,
    guard: &Guard,
) -> Linked<P::Meta> {
    let mut initial = 0;
    // Read under the index shard lock, which orders it after any unlink of the key.
    let placeholder = |g| {
        if g == 0 {
            initial = placeholder_word(db, r.table, r.key);
        }
        P::new_meta(initial | LOCK)
    };
    match table.insert_with(r.key, guard, placeholder, None) {
        InsertOutcome::Inserted(rec) => Linked::New(rec, initial),
        InsertOutcome::Exists(rec) => Linked::Existing(rec),
    }
}

/// Completes a record this batch just linked (all groups locked, holding `initial`, absent). If
/// `r` is newer than `initial`, the groups it names take it and, for an upsert, the others become
/// present with zero columns at `initial`'s TID; otherwise every group stays absent.
fn install_fresh<M: TidMeta>(
    table: &Table<M>,
    r: &Record<'_>,
    rec: RecordPtr<M>,
    initial: u64,
    groups: u32,
    row: &[u64],
    out: &mut Applied,
) {
    let (schema, layout) = (table.schema(), table.layout());
    let newer = r.tid > tid(initial);
    fence(Ordering::Release);
    for (g, group) in schema.groups().iter().enumerate() {
        let meta = rec.meta(layout, g).tid();
        if groups & (1 << g) == 0 {
            let revived = newer && r.kind == RecordKind::Upsert;
            meta.publish(if revived { tid(initial) } else { initial });
            continue;
        }
        if !newer {
            out.skipped_groups += 1;
            meta.publish(initial);
            continue;
        }
        if r.kind == RecordKind::Upsert {
            rec.install_columns(layout, schema, group.columns, row);
        }
        meta.publish(word_of(r));
        out.applied_groups += 1;
    }
}

/// What [`install`] did with a record.
enum Installed {
    /// Every group took the record or refused it by TID.
    Done { applied: usize, skipped: usize },
    /// A group stayed locked ([`HELD_LOCK_SPINS`]); the groups before it were handled.
    Blocked { applied: usize, skipped: usize },
    /// The record is being unlinked; nothing was applied.
    Unlinked,
}

/// Applies `r` to the groups `groups` of a linked record, each under its lock; reports the groups
/// applied and skipped, a group held locked too long, or a record being unlinked (before anything
/// was applied: the unlinker retires the groups in order and gives up at the first one changed).
/// An upsert that finds the row absent in a group it takes revives the row: see [`revive`].
fn install<M: TidMeta>(
    table: &Table<M>,
    r: &Record<'_>,
    rec: RecordPtr<M>,
    groups: u32,
    row: &[u64],
) -> Installed {
    let (schema, layout) = (table.schema(), table.layout());
    let (mut applied, mut skipped) = (0, 0);
    let mut absent = false;
    let mut m = groups;
    while m != 0 {
        let g = m.trailing_zeros() as usize;
        m &= m - 1;
        let meta = rec.meta(layout, g).tid();
        let mut spins = 0u32;
        loop {
            let current = meta.load();
            if current & UNLINKED != 0 {
                debug_assert_eq!(applied + skipped, 0, "an unlinked record was changed");
                return Installed::Unlinked;
            }
            if current & LOCK != 0 {
                if spins >= HELD_LOCK_SPINS {
                    return Installed::Blocked { applied, skipped };
                }
                backoff(&mut spins);
                continue;
            }
            if r.tid <= tid(current) {
                skipped += 1;
                break;
            }
            if !meta.try_lock(current) {
                continue;
            }
            // Data stores that follow must not be seen before the lock (seqlock writer side).
            fence(Ordering::Release);
            if r.kind == RecordKind::Upsert {
                let group = &schema.groups()[g];
                // An absent group starts from zeros: its old bytes belong to a deleted row.
                absent |= current & ABSENT != 0;
                let cols = if current & ABSENT != 0 {
                    group.columns
                } else {
                    group.columns & r.columns
                };
                rec.install_columns(layout, schema, cols, row);
            }
            meta.publish(word_of(r));
            applied += 1;
            break;
        }
    }
    if absent {
        revive(table, r, rec, groups);
    }
    Installed::Done { applied, skipped }
}

/// After upsert `r` found the row absent: each group `r` does not carry that is absent with a TID
/// below `r`'s becomes present with zero columns, keeping its TID, so the row exists again as on
/// the primary and any newer record of the group still lands (a row absent before `r` was
/// re-inserted before `r` on the primary, and that insert, or a later write of the group, carries
/// each group with a higher TID).
fn revive<M: TidMeta>(table: &Table<M>, r: &Record<'_>, rec: RecordPtr<M>, carried: u32) {
    let layout = table.layout();
    let mut m = table.schema().all_groups() & !carried;
    while m != 0 {
        let g = m.trailing_zeros() as usize;
        m &= m - 1;
        let meta = rec.meta(layout, g).tid();
        let mut spins = 0u32;
        loop {
            let current = meta.load();
            if current & LOCK != 0 {
                // Another applier, or an unlinker that will give up: a group of the record changed.
                backoff(&mut spins);
                continue;
            }
            if current & ABSENT == 0 || tid(current) >= r.tid {
                break;
            }
            if meta.try_lock(current) {
                fence(Ordering::Release);
                for w in rec.group_words(layout, g) {
                    w.store(0, Ordering::Relaxed);
                }
                meta.publish(tid(current));
                break;
            }
        }
    }
}

/// The TID word a group takes from `r`.
fn word_of(r: &Record<'_>) -> u64 {
    match r.kind {
        RecordKind::Upsert => r.tid,
        RecordKind::Delete => r.tid | ABSENT,
    }
}

/// Queues `rec` for unlinking if it is a tombstone, every group absent with one word: a delete
/// applied, or a placeholder left absent (a delete, or an upsert older than the key's last known
/// version). Workers unlink it (see [`crate::commit::reclaim`]) once no transaction that could
/// have seen it is left.
fn note_tombstone<P: Protocol>(
    db: &Database<P>,
    table: &Table<P::Meta>,
    r: &Record<'_>,
    rec: RecordPtr<P::Meta>,
    tombstones: &mut VecDeque<Unlink>,
) {
    let layout = table.layout();
    let word = rec.meta(layout, 0).tid().load();
    let groups = table.schema().groups().len();
    if word & (ABSENT | LOCK) != ABSENT
        || (1..groups).any(|g| rec.meta(layout, g).tid().load() != word)
    {
        return;
    }
    tombstones.push_back(Unlink {
        table: r.table,
        key: r.key,
        addr: rec.addr(),
        word,
        stamp: db.epoch.current(),
    });
}

/// Writes the carried columns' bytes `data` into the row image `row`, every other byte zero.
pub(crate) fn unpack(schema: &Schema, columns: u64, data: &[u8], row: &mut [u64]) {
    row.fill(0);
    let mut buf = RowBuf::new(schema, row);
    let bytes = buf.as_bytes_mut();
    let mut at = 0;
    column_runs(schema, columns, |run| {
        let n = run.len();
        bytes[run].copy_from_slice(&data[at..at + n]);
        at += n;
    });
}

/// Waits a little for a lock holder or an unlinker.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins > 64 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}
