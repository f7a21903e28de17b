//! Commit steps shared by the protocols whose metadata is a [`TidWord`]: finding or creating the
//! records of inserts, locking the write set in a global order, validating reads, point misses and
//! scans, installing writes, and unlinking deleted records afterwards.

use std::sync::atomic::{Ordering, fence};

use phasedb_storage::{Guard, InsertOutcome};

use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{LockEntry, TxState, Unlink, WriteKind};
use crate::tid::{ABSENT, LOCK, SPLIT, TidMeta, UNLINKED, tid};

fn conflict<T>(c: Conflict) -> TxResult<T> {
    Err(TxError::Conflict(c))
}

/// The initial word of a placeholder for `key`: absent, carrying the key's last version when recording.
pub(crate) fn placeholder_word<P: Protocol<Meta: TidMeta>>(
    db: &Database<P>,
    table: u32,
    key: u64,
) -> u64 {
    let last = if db.config.record_history {
        db.graveyard.lock().get(&(table, key)).copied().unwrap_or(0)
    } else {
        0
    };
    ABSENT | last
}

/// Finds or creates the record of every insert and locks all its groups.
#[inline(always)]
pub(crate) fn lock_inserts<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    if !st.writes.iter().any(|w| w.kind == WriteKind::Insert) {
        return Ok(());
    }
    prefetch_placeholders(st, db);
    for w in 0..st.writes.len() {
        let entry = &st.writes[w];
        if entry.kind != WriteKind::Insert {
            continue;
        }
        let (t, key) = (entry.table, entry.key);
        let table = db.table(t);
        let groups = table.schema().groups().len();
        // Read under the index shard lock, which orders it after any unlink of the key.
        let mut initial = 0;
        let placeholder = |g| {
            if g == 0 {
                initial = placeholder_word(db, t, key);
            }
            P::new_meta(initial | LOCK)
        };
        match table.insert_with(key, guard, placeholder, None) {
            InsertOutcome::Inserted(rec) => {
                st.writes[w].rec = Some(rec);
                st.writes[w].placeholder = true;
                for g in 0..groups {
                    st.locks.push(LockEntry {
                        rec,
                        group: g as u8,
                        write: w as u32,
                        prev: initial,
                        fresh: true,
                        held: true,
                        shared: false,
                    });
                }
            }
            InsertOutcome::Exists(rec) => {
                st.writes[w].rec = Some(rec);
                for g in 0..groups {
                    let meta = rec.meta(table.layout(), g).tid();
                    let word = meta.load();
                    if word & (LOCK | UNLINKED) != 0 {
                        return conflict(Conflict::InsertRace);
                    }
                    if word & ABSENT == 0 {
                        return conflict(Conflict::InsertRace);
                    }
                    if !meta.try_lock(word) {
                        return conflict(Conflict::InsertRace);
                    }
                    st.locks.push(LockEntry {
                        rec,
                        group: g as u8,
                        write: w as u32,
                        prev: word,
                        fresh: false,
                        held: true,
                        shared: false,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Starts loading the memory of the placeholders the inserts are about to create, table by table.
/// Each index insert releases its shard lock with an atomic instruction that waits for the stores
/// before it, among them those filling the new, cache-cold record; loaded ahead, the records' misses
/// overlap instead of following one another.
#[inline(always)]
fn prefetch_placeholders<P: Protocol<Meta: TidMeta>>(st: &TxState<P::Meta>, db: &Database<P>) {
    let mut run: Option<(u32, usize)> = None;
    for entry in &st.writes {
        if entry.kind != WriteKind::Insert {
            continue;
        }
        run = match run {
            Some((t, n)) if t == entry.table => Some((t, n + 1)),
            Some((t, n)) => {
                db.table(t).prefetch_inserts(n);
                Some((entry.table, 1))
            }
            None => Some((entry.table, 1)),
        };
    }
    if let Some((t, n)) = run {
        db.table(t).prefetch_inserts(n);
    }
}

/// Looks Silo's commit takes at a write lock another committer holds before it gives up: with the
/// pauses between them (see [`LOCK_WAIT_MAX_SHIFT`]) some tens of microseconds, far longer than an
/// install takes, yet bounded, so a lock whose holder was descheduled still ends in an abort.
pub(crate) const LOCK_PATIENCE: u32 = 256;

/// A committer waiting for a write lock pauses `2^min(looks, this)` times between two looks at it.
/// Each look takes the record's cache line from the holder, whose install and unlock must then
/// fetch it back: on a hot record, looking back-to-back lengthens the very hold it waits for (issue
/// 38). Up to 8 pauses between looks keep the hand-off prompt.
const LOCK_WAIT_MAX_SHIFT: u32 = 3;

/// Locks the groups written by updates and deletes, in address order. A lock another transaction holds
/// is waited for during `patience` spins (zero: no-wait); the global order keeps waiting committers
/// from deadlocking each other, and the bound covers everything else.
#[inline(always)]
pub(crate) fn lock_writes<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    patience: u32,
) -> TxResult<()> {
    for (w, entry) in st.writes.iter().enumerate() {
        if matches!(entry.kind, WriteKind::Insert | WriteKind::Cancelled) {
            continue;
        }
        let groups = entry.groups(db.table(entry.table).schema());
        let rec = entry.rec.expect("updates and deletes know their record");
        let mut m = groups;
        while m != 0 {
            let g = m.trailing_zeros() as u8;
            m &= m - 1;
            st.locks.push(LockEntry {
                rec,
                group: g,
                write: w as u32,
                prev: 0,
                fresh: false,
                held: false,
                shared: false,
            });
        }
    }
    st.locks.sort_unstable_by_key(LockEntry::order);
    for i in 0..st.locks.len() {
        let l = &st.locks[i];
        if l.held {
            continue;
        }
        let layout = db.table(st.writes[l.write as usize].table).layout();
        let meta = l.rec.meta(layout, l.group as usize).tid();
        let mut word = meta.load();
        let mut spins = 0;
        // Split data (Doppel) stays locked for a whole phase: never worth waiting for.
        while word & LOCK != 0 && word & SPLIT == 0 && spins < patience {
            for _ in 0..1u32 << spins.min(LOCK_WAIT_MAX_SHIFT) {
                std::hint::spin_loop();
            }
            spins += 1;
            word = meta.load();
        }
        if word & LOCK != 0 {
            return conflict(Conflict::WriteLocked);
        }
        if word & (ABSENT | UNLINKED) != 0 {
            return conflict(Conflict::Validation);
        }
        if spins != 0 && overwritten_since_read(st, l.rec, l.group, word) {
            // The holder waited for installed a version this transaction read an older one of:
            // validation would fail. Aborting before locking spares the record's cache line the
            // lock and the release a doomed commit would write to it (a hot record's next
            // committer needs that line).
            return conflict(Conflict::Validation);
        }
        if !meta.try_lock(word) {
            return conflict(Conflict::WriteLocked);
        }
        let l = &mut st.locks[i];
        l.prev = word;
        l.held = true;
    }
    // Data stores that follow must not be seen before the locks (seqlock writer side).
    fence(Ordering::Release);
    Ok(())
}

/// Whether the transaction read group `g` of `rec` at a version other than `word`'s. Asked only
/// after waiting for another committer's lock, so the scan of the read set stays off the
/// uncontended path.
#[cold]
fn overwritten_since_read<M: TidMeta>(
    st: &TxState<M>,
    rec: phasedb_storage::RecordPtr<M>,
    g: u8,
    word: u64,
) -> bool {
    st.reads
        .iter()
        .any(|r| r.rec == rec && r.group == g && r.observed != word)
}

/// Releases every held lock, restoring the previous words; fresh placeholders stay absent and are
/// queued for unlinking.
pub(crate) fn release<P: Protocol<Meta: TidMeta>>(st: &mut TxState<P::Meta>, db: &Database<P>) {
    for l in &mut st.locks {
        if !l.held {
            continue;
        }
        let t = st.writes[l.write as usize].table;
        l.rec
            .meta(db.table(t).layout(), l.group as usize)
            .tid()
            .publish(l.prev);
        l.held = false;
        if l.fresh && l.group == 0 {
            st.writes[l.write as usize].placeholder = false;
            let key = st.writes[l.write as usize].key;
            st.unlink.push(Unlink {
                table: t,
                key,
                addr: l.rec.addr(),
                word: l.prev,
                stamp: 0,
            });
        }
    }
}

/// Whether every read group still holds the version observed and is not locked by another writer.
pub(crate) fn validate_reads<P: Protocol<Meta: TidMeta>>(
    st: &TxState<P::Meta>,
    db: &Database<P>,
) -> TxResult<()> {
    for r in &st.reads {
        let word = r
            .rec
            .meta(db.table(r.table).layout(), r.group as usize)
            .tid()
            .load();
        if word & !LOCK != r.observed {
            return conflict(Conflict::Validation);
        }
        if word & LOCK != 0 && st.holds_lock(r.rec, r.group).is_none() {
            return conflict(Conflict::Validation);
        }
    }
    Ok(())
}

/// OCC validation of everything read: versions, point misses and scanned ranges.
#[inline(always)]
pub(crate) fn validate<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    validate_reads(st, db)
        .and_then(|()| validate_misses(st, db, guard))
        .and_then(|()| validate_scans(st, db, guard))
}

/// Whether keys read as missing are still missing: any record now linked under such a key, other than
/// this transaction's own new placeholder, was linked after the miss (tombstones stay linked while a
/// transaction that could have missed them runs, see [`crate::activity`]). While recording, notes the
/// version of absence each miss confirms. Most transactions miss nothing: they skip the call.
#[inline(always)]
pub(crate) fn validate_misses<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    if st.misses.is_empty() {
        return Ok(());
    }
    recheck_misses(st, db, guard)
}

fn recheck_misses<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    for i in 0..st.misses.len() {
        let (t, key) = (st.misses[i].table, st.misses[i].key);
        let own = st.writes.get(st.misses[i].write as usize);
        if let Some(w) = own.filter(|w| w.kind == WriteKind::Insert && w.placeholder) {
            // The key was still missing when this commit linked its own placeholder under it, which
            // stays locked until the commit ends.
            if db.config.record_history {
                let rec = w.rec.expect("a linked placeholder");
                st.misses[i].version = st.holds_lock(rec, 0).map_or(0, |l| tid(l.prev));
            }
            continue;
        }
        let table = db.table(t);
        let version = match table.get(key, guard) {
            None => None,
            Some(rec) => match st.holds_lock(rec, 0) {
                Some(l) if l.fresh => Some(tid(l.prev)),
                _ => return conflict(Conflict::Phantom),
            },
        };
        if db.config.record_history {
            st.misses[i].version =
                version.unwrap_or_else(|| placeholder_word(db, t, key) & !ABSENT);
        }
    }
    Ok(())
}

/// Scans every range again and checks it holds the same records, present or not, as when it was
/// scanned, apart from this transaction's own new placeholders (Silo's node-set check, done by
/// re-scanning because the ordered index has no versioned nodes). Changes to the records themselves are
/// caught by read validation. Transactions that scanned nothing skip the call.
#[inline(always)]
pub(crate) fn validate_scans<P: Protocol<Meta: TidMeta>>(
    st: &TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    if st.scans.is_empty() {
        return Ok(());
    }
    rescan(st, db, guard)
}

fn rescan<P: Protocol<Meta: TidMeta>>(
    st: &TxState<P::Meta>,
    db: &Database<P>,
    guard: &Guard,
) -> TxResult<()> {
    for s in &st.scans {
        let table = db.table(s.table);
        let seen = &st.scan_seen[s.seen.clone()];
        let mut next = 0;
        let mut ok = true;
        table.scan(s.lo, s.hi, guard, |_, rec| {
            if rec.meta(table.layout(), 0).tid().load() & LOCK != 0 {
                match st.holds_lock(rec, 0) {
                    Some(l) if l.fresh => return true,
                    Some(_) => {}
                    None => {
                        ok = false;
                        return false;
                    }
                }
            }
            if seen.get(next) != Some(&rec.addr()) {
                ok = false;
                return false;
            }
            next += 1;
            true
        });
        if !ok || next != seen.len() {
            return conflict(Conflict::Phantom);
        }
    }
    Ok(())
}

/// Writes the buffered images into the locked records and publishes `tid` on every locked group,
/// which unlocks it (a group listed but not locked, whose only writer is this one, just takes the
/// word). Deleted records are queued for unlinking.
#[inline(always)]
pub(crate) fn install<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    tid: u64,
) {
    install_logged(st, db, tid, None);
}

/// [`install`], logging each record with `epoch` besides `tid` if set (TicToc, whose commit
/// timestamps are not Silo TIDs and so carry no epoch).
#[inline(always)]
pub(crate) fn install_logged<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    tid: u64,
    epoch: Option<u64>,
) {
    install_images(st, db);
    log_installed(st, db, (tid, epoch));
    publish_installed(st, db, tid);
}

/// Appends the installed writes to the worker's log buffer (SiloR), while every lock is still
/// held: a later writer of these groups logs after this one.
#[inline(always)]
fn log_installed<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    at: (u64, Option<u64>),
) {
    if let Some(log) = &st.log {
        log.logs[st.slot].append(&db.tables, &st.writes, &mut st.row, at);
    }
}

/// [`install`], except that every locked group stays locked, now holding `tid` (and its data):
/// readers and writers of those groups see a lock and conflict until [`release_held`]. A group
/// listed but not locked (Star's partitioned rule) takes its word at once, as in [`install`].
pub(crate) fn install_held<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    tid: u64,
) {
    install_images(st, db);
    log_installed(st, db, (tid, None));
    for l in &mut st.locks {
        let w = &st.writes[l.write as usize];
        let word = installed_word(w.kind, tid);
        let meta = l
            .rec
            .meta(db.table(w.table).layout(), l.group as usize)
            .tid();
        if l.held {
            meta.publish(word | LOCK);
        } else {
            meta.store(word);
        }
    }
}

/// The TID word a write leaves on its groups: `tid`, marked absent for a delete.
#[inline(always)]
fn installed_word(kind: WriteKind, tid: u64) -> u64 {
    if kind == WriteKind::Delete {
        tid | ABSENT
    } else {
        tid
    }
}

/// Unlocks what [`install_held`] kept locked, publishing the words it installed with `tid`
/// (deleted records are then queued for unlinking).
pub(crate) fn release_held<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    tid: u64,
) {
    for l in &mut st.locks {
        if !l.held {
            continue;
        }
        let w = &st.writes[l.write as usize];
        let word = installed_word(w.kind, tid);
        l.rec
            .meta(db.table(w.table).layout(), l.group as usize)
            .tid()
            .publish(word);
        l.held = false;
        if w.kind == WriteKind::Delete && l.group == 0 {
            st.unlink.push(Unlink {
                table: w.table,
                key: w.key,
                addr: l.rec.addr(),
                word,
                stamp: 1,
            });
        }
    }
}

/// Writes the buffered images into the records (locked, or written by their only writer).
#[inline(always)]
fn install_images<P: Protocol<Meta: TidMeta>>(st: &mut TxState<P::Meta>, db: &Database<P>) {
    if !st.deferred_ops.is_empty() {
        crate::commute::resolve_at_install(st, db);
    }
    for w in &st.writes {
        if matches!(w.kind, WriteKind::Update | WriteKind::Insert) {
            let table = db.table(w.table);
            let n = table.schema().row_words();
            let rec = w.rec.expect("locked writes know their record");
            rec.install_columns(
                table.layout(),
                table.schema(),
                w.columns,
                &st.images[w.image..w.image + n],
            );
        }
    }
}

/// Publishes `tid` on every group [`install_images`] wrote, unlocking the locked ones; deleted
/// records are queued for unlinking.
#[inline(always)]
fn publish_installed<P: Protocol<Meta: TidMeta>>(
    st: &mut TxState<P::Meta>,
    db: &Database<P>,
    tid: u64,
) {
    for l in &mut st.locks {
        let w = &st.writes[l.write as usize];
        let word = installed_word(w.kind, tid);
        let meta = l
            .rec
            .meta(db.table(w.table).layout(), l.group as usize)
            .tid();
        if l.held {
            meta.publish(word);
        } else {
            // Not locked: the writer is the group's only one (Star's partitioned phase).
            meta.store(word);
        }
        l.held = false;
        if w.kind == WriteKind::Delete && l.group == 0 {
            st.unlink.push(Unlink {
                table: w.table,
                key: w.key,
                addr: l.rec.addr(),
                word,
                stamp: 1,
            });
        }
    }
}

/// The commit TID: above every version read or overwritten and the worker's last TID, and in the
/// current epoch (Silo §4.2).
pub(crate) fn choose_tid<M>(st: &TxState<M>, last_tid: u64, epoch: u64) -> u64 {
    let mut max = last_tid;
    for r in &st.reads {
        max = max.max(tid(r.observed));
    }
    for l in &st.locks {
        max = max.max(tid(l.prev));
    }
    (max + 1).max(epoch << crate::tid::EPOCH_SHIFT)
}

/// Unlinks what the last attempt left behind: aborted placeholders at once, deleted records once no
/// transaction that ran while they were deleted is left. A record is unlinked only if it still holds
/// the word it was left with (nobody reused it meanwhile); it is first retired, so that anyone still
/// holding it looks the key up again. Run while the worker's own transaction is not running.
#[inline(always)]
pub(crate) fn reclaim<P: Protocol<Meta: TidMeta>>(db: &Database<P>, st: &mut TxState<P::Meta>) {
    db.take_orphans(&mut st.limbo);
    if st.unlink.is_empty() && st.limbo.is_empty() {
        return;
    }
    reclaim_unlinks(db, st);
}

/// The body of [`reclaim`] for a transaction with unlinks to do or wait for.
fn reclaim_unlinks<P: Protocol<Meta: TidMeta>>(db: &Database<P>, st: &mut TxState<P::Meta>) {
    let guard = phasedb_storage::pin();
    let now = db.epoch.current();
    for mut u in st.unlink.drain(..) {
        if u.stamp == 0 && unlink(db, u, &guard) {
            continue;
        }
        u.stamp = now;
        st.limbo.push_back(u);
    }
    if st.limbo.front().is_some_and(|u| u.stamp < now) {
        let oldest = db.activity.oldest();
        let mut busy = 0;
        while st.limbo.front().is_some_and(|u| u.stamp < oldest) && busy < st.limbo.len() {
            let mut u = st.limbo.pop_front().expect("front exists");
            if !unlink(db, u, &guard) {
                u.stamp = now;
                st.limbo.push_back(u);
                busy += 1;
            }
        }
    }
}

/// Unlinks `u` if its record still holds the word it was left with; returns false if a reader holds it
/// (worth trying again later), true otherwise (unlinked, or reused by someone else).
fn unlink<P: Protocol<Meta: TidMeta>>(db: &Database<P>, u: Unlink, guard: &Guard) -> bool {
    let table = db.table(u.table);
    let layout = table.layout();
    let groups = table.schema().groups().len();
    let mut shared = false;
    table.unlink_if(u.key, u.addr, guard, |rec| {
        let retired = (0..groups)
            .take_while(|&g| rec.meta(layout, g).tid().retire(u.word))
            .count();
        shared = retired == groups && (0..groups).any(|g| !rec.meta(layout, g).unshared());
        if retired < groups || shared {
            for g in 0..retired {
                rec.meta(layout, g).tid().publish(u.word);
            }
            return false;
        }
        if db.config.record_history {
            db.graveyard.lock().insert((u.table, u.key), tid(u.word));
        }
        let claimed = (0..groups)
            .map(|g| rec.meta(layout, g).read_ts())
            .max()
            .unwrap_or(0);
        if claimed > 0 {
            db.phantom_ts[u.table as usize].fetch_max(claimed, std::sync::atomic::Ordering::SeqCst);
        }
        true
    });
    !shared
}
