//! Strict two-phase locking with reader-writer locks per column group, in three flavours that differ
//! only in what a transaction does when a lock it wants is held:
//! - `2pl-nowait` aborts at once (no deadlock is possible);
//! - `2pl-waitdie` waits if it is older than the holders and dies otherwise (Rosenkrantz et al.), so
//!   waits only go from older to younger transactions and cannot form a cycle;
//! - `2pl` (the Doppel paper's baseline) waits, and resolves deadlocks by timeout: a waiter that sees no
//!   holder of its lock commit for [`DEADLOCK_TIMEOUT`] aborts, and retries after backoff.
//!
//! Under `2pl`, a transaction that upgrades its shared lock and finds the exclusive lock taken aborts
//! at once: the taker holds the lock bit while it waits for the shared holders to leave, this
//! transaction among them, so waiting would be a certain deadlock (two transactions that each read a
//! row, then update it). Wait-die settles the same race by age without waiting it out.
//!
//! Reads take shared locks while executing, writes take exclusive locks when first buffered; both are
//! held until commit or abort. Inserts lock their placeholder at commit, and phantoms (point misses,
//! scans) are checked at commit as OCC does, since locks protect only records that exist.
//!
//! A waiter (`2pl`, and an old transaction under wait-die) first spins, looking at the lock with
//! pauses doubling up to a few hundred nanoseconds between looks, which covers a short critical
//! section without stealing the holder's cache line at every look. If the lock is still held after
//! [`SPINS_BEFORE_PARK`] looks, the waiter parks: it sleeps until the lock's release wakes it, so a
//! holder that was descheduled (more runnable threads than cores) gets a core instead of waiters
//! spinning or yielding through their slices. A parked waiter aborts once it has waited
//! [`DEADLOCK_TIMEOUT`] without seeing the group's holders commit (see [`patience`]). The wake-up
//! protocol (a flag bit in the group's reader count, so a release with nobody parked pays nothing
//! extra) is in [`park`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use phasedb_storage::{Guard, RecordLayout, RecordPtr, TableId};

use crate::commit;
use crate::database::Database;
use crate::error::{Conflict, TxError, TxResult};
use crate::protocol::Protocol;
use crate::state::{CommitCtx, LockEntry, TxState, WriteKind};
use crate::tid::{ABSENT, LOCK, TidMeta, TidWord, UNLINKED};

mod park;
mod patience;

use park::{PARKED, holders};
use patience::Patience;

/// The atomics and the parking lot [`park`] works with (a model of them in its `shuttle` test).
mod sync {
    use std::time::Instant;

    pub(super) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Sleeps on `key` until woken or `deadline`, if `validate()` holds under the lot's lock.
    pub(super) fn park_until(key: usize, validate: impl FnOnce() -> bool, deadline: Instant) {
        // SAFETY: `validate` only loads atomics: it neither panics nor calls into the parking lot.
        unsafe {
            parking_lot_core::park(
                key,
                validate,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                Some(deadline),
            );
        }
    }

    /// Wakes every thread parked on `key`.
    pub(super) fn unpark_all(key: usize) {
        // SAFETY: no callback runs under the lot's lock.
        unsafe {
            parking_lot_core::unpark_all(key, parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }
}

/// How long a blocked transaction waits without seeing the lock's holders commit before it
/// presumes a deadlock and aborts.
pub const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(2);

/// Abort at once on a held lock.
pub const NO_WAIT: u8 = 0;
/// Wait for younger holders, die for older ones.
pub const WAIT_DIE: u8 = 1;
/// Wait, with deadlocks broken by timeout.
pub const BLOCKING: u8 = 2;

/// Two-phase locking with conflict policy `POLICY` (`NO_WAIT`, `WAIT_DIE` or `BLOCKING`; see [`TwoPlNoWait`], [`TwoPlWaitDie`], [`TwoPlBlocking`]).
pub struct TwoPl<const POLICY: u8>;

/// `2pl-nowait`.
pub type TwoPlNoWait = TwoPl<NO_WAIT>;
/// `2pl-waitdie`.
pub type TwoPlWaitDie = TwoPl<WAIT_DIE>;
/// `2pl`: blocking locks with timeout-based deadlock resolution.
pub type TwoPlBlocking = TwoPl<BLOCKING>;

/// A group's lock: the TID word's LOCK bit is the exclusive lock, `readers` counts shared holders
/// (and carries [`park::PARKED`]).
pub struct LockMeta {
    word: TidWord,
    readers: AtomicU32,
    /// Age of the exclusive holder (wait-die), `u64::MAX` when none.
    owner_ts: AtomicU64,
    /// Oldest age among the shared holders since the count was last zero (wait-die; may be older
    /// than the oldest current holder, which only makes waiters die more often).
    reader_ts: AtomicU64,
}

impl TidMeta for LockMeta {
    #[inline]
    fn tid(&self) -> &TidWord {
        &self.word
    }

    fn unshared(&self) -> bool {
        holders(self.readers.load(Ordering::SeqCst)) == 0
    }
}

/// What a waiter tracks across its tries for one lock.
struct Wait {
    patience: Patience,
    spins: u32,
    /// The group's word, less the lock bit, at the last look.
    seen: u64,
    /// How many times a look found that the lock had changed hands since the previous one.
    handed_on: u32,
}

/// Most pauses a waiter makes between two looks at a lock that stays with one holder. A waiter that
/// looks at the lock's cache line takes it away from the holder, whose next store to its record must
/// then fetch it back. Pauses doubling up to this bound (a few hundred nanoseconds) keep the
/// hand-off prompt when the hold ends, while costing the holder at most a line transfer per look.
const MAX_PAUSES: u32 = 8;

/// Most pauses between two looks at a lock that keeps changing hands: each time a look finds a new
/// version under the lock (a holder committed and a holder, perhaps the same, locked it again before
/// this waiter looked), the pauses double, up to this bound (some microseconds). On a hot record
/// whose transactions are short, the line then stays with the thread running them for many
/// transactions instead of moving at every one of them, which is where 2PL lost most of its
/// throughput to its own waiters (issue 38). A waiter behind a long hold sees no new version and keeps
/// looking every [`MAX_PAUSES`].
const MAX_HANDED_ON_PAUSES: u32 = 256;

/// Looks at a held lock after which a waiter parks until the lock is released: the hold has
/// outlasted a short critical section (some microseconds of spinning), and its holder may be waiting
/// for this core.
pub const SPINS_BEFORE_PARK: u32 = 64;

impl Wait {
    fn new() -> Wait {
        Wait {
            patience: Patience::default(),
            spins: 0,
            seen: 0,
            handed_on: 0,
        }
    }

    /// Decides, under `POLICY`, whether a transaction of age `ts` waits for a holder of age
    /// `holder_ts` of `m` (then it pauses, or parks while `blocked(word, holders)`, and returns
    /// Ok) or aborts.
    #[inline]
    fn decide<const POLICY: u8>(
        &mut self,
        ts: u64,
        holder_ts: impl FnOnce() -> u64,
        conflict: Conflict,
        m: &LockMeta,
        blocked: impl Fn(u64, u32) -> bool,
    ) -> TxResult<()> {
        let may_wait = match POLICY {
            NO_WAIT => false,
            WAIT_DIE => ts < holder_ts(),
            _ => true,
        };
        if !may_wait {
            return Err(TxError::Conflict(conflict));
        }
        self.pause(m, blocked)
    }

    /// One wait between two looks at a held lock: pauses doubling up to [`MAX_PAUSES`] (further,
    /// up to [`MAX_HANDED_ON_PAUSES`], as the lock changes hands between looks), and after
    /// [`SPINS_BEFORE_PARK`] looks a park until the release; a wait that outlasts its
    /// [`Patience`] ends in an abort.
    #[cold]
    fn pause(&mut self, m: &LockMeta, blocked: impl Fn(u64, u32) -> bool) -> TxResult<()> {
        self.spins += 1;
        let word = m.word.0.load(Ordering::Relaxed);
        let version = word & !LOCK;
        if self.spins > 1 && version != self.seen {
            self.handed_on += 1;
        }
        self.seen = version;
        if self.spins < SPINS_BEFORE_PARK {
            for _ in 0..pauses_between_looks(self.spins, self.handed_on) {
                std::hint::spin_loop();
            }
            return Ok(());
        }
        if self.patience.expired(Instant::now(), word) {
            return Err(TxError::Conflict(Conflict::LockTimeout));
        }
        park::park(&m.word.0, &m.readers, blocked, self.patience.deadline());
        Ok(())
    }
}

/// Pauses before the next look, after `looks` looks of which `handed_on` found the lock in new hands:
/// doubling with each look up to [`MAX_PAUSES`], and with each hand-off further up to
/// [`MAX_HANDED_ON_PAUSES`].
fn pauses_between_looks(looks: u32, handed_on: u32) -> u32 {
    let growth = (MAX_HANDED_ON_PAUSES / MAX_PAUSES).trailing_zeros();
    (1u32 << looks.min(MAX_PAUSES.trailing_zeros())) << handed_on.min(growth)
}

/// Whether a waiter for `m`'s exclusive lock is still blocked.
fn exclusive_held(word: u64, _holders: u32) -> bool {
    word & LOCK != 0 && word & UNLINKED == 0
}

fn holds_exclusive(st: &TxState<LockMeta>, rec: RecordPtr<LockMeta>, g: u8) -> bool {
    st.locks
        .iter()
        .any(|l| l.held && l.rec == rec && l.group == g)
}

fn holds_shared(st: &TxState<LockMeta>, rec: RecordPtr<LockMeta>, g: u8) -> bool {
    st.holds(rec, g)
}

/// Drops one shared hold of `m` (after the same transaction's exclusive hold, if any, was
/// published) and wakes the group's parked waiters. Only wait-die keeps the readers' age (the other
/// policies write nothing more to the group's cache line).
#[inline(always)]
fn release_shared_count<const POLICY: u8>(m: &LockMeta) {
    let prev = m.readers.fetch_sub(1, Ordering::AcqRel);
    if POLICY == WAIT_DIE && holders(prev) == 1 {
        m.reader_ts.store(u64::MAX, Ordering::Relaxed);
    }
    park::after_release(&m.readers, prev);
}

/// Wakes the waiters parked on the groups whose exclusive locks were just published, where the
/// attempt holds no shared count (whose release, coming next, wakes them).
#[inline(always)]
fn wake_exclusive<const POLICY: u8>(st: &TxState<LockMeta>, db: &Database<TwoPl<POLICY>>) {
    if POLICY == NO_WAIT {
        return;
    }
    for l in st.locks.iter().filter(|l| !l.shared) {
        let t = st.writes[l.write as usize].table;
        park::released_exclusive(&l.rec.meta(db.table(t).layout(), l.group as usize).readers);
    }
}

/// Clears the exclusive holder's age of the groups the attempt locked (wait-die only).
fn clear_owner_ts<const POLICY: u8>(st: &TxState<LockMeta>, db: &Database<TwoPl<POLICY>>) {
    if POLICY != WAIT_DIE {
        return;
    }
    for l in st.locks.iter().filter(|l| l.held) {
        let t = st.writes[l.write as usize].table;
        l.rec
            .meta(db.table(t).layout(), l.group as usize)
            .owner_ts
            .store(u64::MAX, Ordering::Relaxed);
    }
}

/// Releases every lock the attempt holds: exclusive ones back to their previous word (placeholders
/// are queued for unlinking), shared ones by count.
fn release_all<const POLICY: u8>(st: &mut TxState<LockMeta>, db: &Database<TwoPl<POLICY>>) {
    clear_owner_ts(st, db);
    let held = st.locks.iter().any(|l| l.held);
    commit::release(st, db);
    if held {
        wake_exclusive(st, db);
    }
    for s in st.take_held() {
        release_shared_count::<POLICY>(s.rec.meta(db.table(s.table).layout(), s.group as usize));
    }
}

/// Locks the inserts' records (see [`commit::lock_inserts`]); a reused tombstone share-locked by
/// readers that saw the key absent aborts the insert, which must not overtake them (fresh
/// placeholders cannot have readers yet). Everything is released on failure.
fn lock_inserts<const POLICY: u8>(
    st: &mut TxState<LockMeta>,
    db: &Database<TwoPl<POLICY>>,
    guard: &Guard,
) -> TxResult<()> {
    if let Err(e) = commit::lock_inserts(st, db, guard) {
        release_all(st, db);
        return Err(e);
    }
    let read_by_others = st.locks.iter().any(|l| {
        l.held
            && !l.fresh
            && st.writes[l.write as usize].kind == WriteKind::Insert
            && l.rec
                .meta(
                    db.table(st.writes[l.write as usize].table).layout(),
                    l.group as usize,
                )
                .readers
                .load(Ordering::SeqCst)
                & !PARKED
                != holds_shared(st, l.rec, l.group) as u32
    });
    if read_by_others {
        release_all(st, db);
        return Err(TxError::Conflict(Conflict::WriteLocked));
    }
    Ok(())
}

impl<const POLICY: u8> Protocol for TwoPl<POLICY> {
    const NAME: &'static str = match POLICY {
        NO_WAIT => "2pl-nowait",
        WAIT_DIE => "2pl-waitdie",
        _ => "2pl",
    };
    const PARTIAL_READS: bool = true;
    type Shared = ();
    const USES_AGE: bool = POLICY == WAIT_DIE;
    const READS_LOCK: bool = true;
    type Meta = LockMeta;

    fn start_durability(
        db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        crate::durability::start(db)
    }

    fn new_meta(word: u64) -> LockMeta {
        LockMeta {
            word: TidWord::new(word),
            readers: AtomicU32::new(0),
            owner_ts: AtomicU64::new(u64::MAX),
            reader_ts: AtomicU64::new(u64::MAX),
        }
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    fn read_group(
        st: &mut TxState<LockMeta>,
        _db: &Database<Self>,
        table: TableId,
        rec: RecordPtr<LockMeta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let m = rec.meta(layout, g);
        let out = |st: &mut TxState<LockMeta>, word: u64| {
            if word & ABSENT == 0 {
                rec.copy_part(layout, g, first, &mut st.row[first..first + words]);
            }
        };
        if holds_exclusive(st, rec, g as u8) || holds_shared(st, rec, g as u8) {
            let word = m.word.0.load(Ordering::Acquire) & !LOCK;
            out(st, word);
            return Ok(word);
        }
        let mut wait = Wait::new();
        loop {
            // Look before registering: a waiter that counted itself in and out at every look would
            // write the holder's cache line.
            let mut word = m.word.0.load(Ordering::Relaxed);
            if word & LOCK == 0 {
                m.readers.fetch_add(1, Ordering::SeqCst);
                word = m.word.0.load(Ordering::SeqCst);
                if word & LOCK == 0 {
                    if POLICY == WAIT_DIE {
                        m.reader_ts.fetch_min(st.ts, Ordering::AcqRel);
                    }
                    st.hold(table, rec, g as u8);
                    out(st, word);
                    return Ok(word);
                }
                release_shared_count::<POLICY>(m);
            }
            if word & UNLINKED != 0 {
                return Err(TxError::Conflict(Conflict::ReadLocked));
            }
            wait.decide::<POLICY>(
                st.ts,
                || m.owner_ts.load(Ordering::Acquire),
                Conflict::ReadLocked,
                m,
                exclusive_held,
            )?;
        }
    }

    fn on_write(
        st: &mut TxState<LockMeta>,
        _db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<LockMeta>,
        layout: &RecordLayout,
        groups: u32,
        write: usize,
    ) -> TxResult<()> {
        let mut mask = groups;
        while mask != 0 {
            let g = mask.trailing_zeros() as u8;
            mask &= mask - 1;
            if holds_exclusive(st, rec, g) {
                continue;
            }
            let own_readers = holds_shared(st, rec, g) as u32;
            let m = rec.meta(layout, g as usize);
            let mut wait = Wait::new();
            let prev = loop {
                let word = m.word.0.load(Ordering::SeqCst);
                if word & LOCK != 0 {
                    if word & UNLINKED != 0 {
                        return Err(TxError::Conflict(Conflict::WriteLocked));
                    }
                    if POLICY == BLOCKING && own_readers != 0 {
                        return Err(TxError::Conflict(Conflict::Deadlock));
                    }
                    wait.decide::<POLICY>(
                        st.ts,
                        || m.owner_ts.load(Ordering::Acquire),
                        Conflict::WriteLocked,
                        m,
                        exclusive_held,
                    )?;
                    continue;
                }
                if word & ABSENT != 0 {
                    return Err(TxError::Conflict(Conflict::Validation));
                }
                if m.word.try_lock(word) {
                    break word;
                }
            };
            if POLICY == WAIT_DIE {
                m.owner_ts.store(st.ts, Ordering::Release);
            }
            // Holding the lock bit keeps new readers out; wait for the current ones to leave.
            while holders(m.readers.load(Ordering::SeqCst)) != own_readers {
                let holder = || m.reader_ts.load(Ordering::Acquire);
                let blocked = |_, n| n != own_readers;
                if let Err(e) =
                    wait.decide::<POLICY>(st.ts, holder, Conflict::WriteLocked, m, blocked)
                {
                    if POLICY == WAIT_DIE {
                        m.owner_ts.store(u64::MAX, Ordering::Relaxed);
                    }
                    m.word.publish(prev);
                    if own_readers == 0 {
                        park::released_exclusive(&m.readers);
                    }
                    return Err(e);
                }
            }
            st.locks.push(LockEntry {
                rec,
                group: g,
                write: write as u32,
                prev,
                fresh: false,
                held: true,
                shared: own_readers != 0,
            });
        }
        Ok(())
    }

    fn commit(st: &mut TxState<LockMeta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        if st.writes.iter().any(|w| w.kind == WriteKind::Insert) {
            lock_inserts(st, db, ctx.guard)?;
        }
        st.locks.sort_unstable_by_key(LockEntry::order);
        if !(st.misses.is_empty() && st.scans.is_empty()) {
            // The locks must be visible before the index is looked at again. Without misses or
            // scans nothing needs the fence: every lock was taken with an acquiring instruction,
            // and the epoch read below is ordered after the releases of the transactions this one
            // depends on by those.
            fence(Ordering::SeqCst);
        }
        let epoch = db.epoch.current();
        let valid = commit::validate_misses(st, db, ctx.guard)
            .and_then(|()| commit::validate_scans(st, db, ctx.guard));
        if let Err(e) = valid {
            release_all(st, db);
            return Err(e);
        }
        if st.writes.iter().any(|w| w.kind != WriteKind::Cancelled) {
            clear_owner_ts(st, db);
            let tid = commit::choose_tid(st, *ctx.last_tid, epoch);
            commit::install(st, db, tid);
            wake_exclusive(st, db);
            *ctx.last_tid = tid;
            ctx.tid = tid;
        }
        for s in st.take_held() {
            release_shared_count::<POLICY>(
                s.rec.meta(db.table(s.table).layout(), s.group as usize),
            );
        }
        Ok(())
    }

    fn reads_valid(_st: &mut TxState<LockMeta>, _db: &Database<Self>, _guard: &Guard) -> bool {
        true
    }

    fn abort(st: &mut TxState<LockMeta>, db: &Database<Self>) {
        release_all(st, db);
    }

    #[inline]
    fn reclaim(st: &mut TxState<LockMeta>, db: &Database<Self>) {
        commit::reclaim(db, st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_per_look_to_the_short_bound_and_per_hand_off_to_the_long_one() {
        let short: Vec<u32> = (1..6).map(|l| pauses_between_looks(l, 0)).collect();
        assert_eq!(short, [2, 4, 8, 8, 8]);
        assert_eq!(pauses_between_looks(40, 0), MAX_PAUSES);
        let handed: Vec<u32> = (0..8).map(|h| pauses_between_looks(3, h)).collect();
        assert_eq!(handed, [8, 16, 32, 64, 128, 256, 256, 256]);
        assert_eq!(pauses_between_looks(63, 63), MAX_HANDED_ON_PAUSES);
    }

    #[test]
    fn a_waiter_counts_the_looks_that_find_a_new_version_under_the_lock() {
        let m = TwoPlBlocking::new_meta(7 | LOCK);
        let mut wait = Wait::new();
        let blocked = |_, _| true;
        // The same holder keeps the lock: no hand-off, whatever the number of looks.
        for _ in 0..4 {
            wait.pause(&m, blocked).unwrap();
        }
        assert_eq!(wait.handed_on, 0);
        // Each look now finds another committed version, locked again.
        for v in 8..11 {
            m.word.0.store(v | LOCK, Ordering::Relaxed);
            wait.pause(&m, blocked).unwrap();
        }
        assert_eq!(wait.handed_on, 3);
        // Taking and dropping the lock bit alone is not a hand-off.
        m.word.0.store(10, Ordering::Relaxed);
        wait.pause(&m, blocked).unwrap();
        assert_eq!(wait.handed_on, 3);
    }
}
