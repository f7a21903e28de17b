//! Doppel's coordinator: conflict sampling in joined phases, the choice of split records, and the
//! changes joined → split and split → reconciliation → joined.

use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::MutexGuard;
use phasedb_storage::TableId;

use super::policy::SplitPolicy;
use super::reconcile;
use super::split::{CoordState, EntrySample, MAX_SAMPLED, SLICE_PAD, SplitEntry, SplitLabel, fits};
use super::{Doppel, JOINED, RECONCILE, SPLIT_PHASE};
use crate::database::Database;
use crate::phase;
use crate::splittable::{self, OpKind};
use crate::state::{TxState, WriteKind};
use crate::tid::{ABSENT, EPOCH_SHIFT, LOCK, SPLIT, TidWord, UNLINKED, tid};

/// The shortest joined phase between two split phases.
const SHORTEST_JOINED: Duration = Duration::from_micros(200);

/// Records which of the aborted attempt's reads changed under it, with the splittable operation the
/// attempt ran on that record, if any.
pub(super) fn sample_conflict(st: &TxState<TidWord>, db: &Database<Doppel>) {
    // SAFETY: called by the worker inside its own attempt, in a joined phase.
    let slot = unsafe { db.shared.slot(st.slot) };
    for r in &st.reads {
        let table = db.table(r.table);
        if r.rec.meta(table.layout(), r.group as usize).load() == r.observed {
            continue;
        }
        let key = r.key;
        let group = r.group as usize;
        let schema = table.schema();
        let on_group = |c: &&(TableId, u64, u16, OpKind)| {
            c.0 == r.table && c.1 == key && schema.column(c.2 as usize).group == group
        };
        let (mut op, mut op_cols) = (None, 0u64);
        for c in st.split_candidates.iter().filter(on_group) {
            op.get_or_insert((c.2, c.3));
            op_cols |= 1 << c.2;
        }
        // Were the record split, an attempt that also wrote the group other than by splittable
        // operations, or read it besides a commutative update (which reads nothing itself), would be
        // stashed, and its conflicts would stay: TPC-C's NewOrder on a District row whose
        // year-to-date Payment adds to, or Payment itself reading the row's name.
        let touched_otherwise = st.find_write(r.table, key).is_some_and(|w| {
            let e = &st.writes[w];
            let commuted = || {
                st.deferred_ops
                    .iter()
                    .any(|d| d.write as usize == w && schema.column(d.col as usize).group == group)
            };
            match e.kind {
                WriteKind::Update => {
                    e.columns & schema.groups()[group].columns & !op_cols != 0 || commuted()
                }
                WriteKind::Insert | WriteKind::Delete => true,
                WriteKind::Cancelled => false,
            }
        });
        let id = (r.table, key, r.group);
        if slot.conflicts.len() >= MAX_SAMPLED && !slot.conflicts.contains_key(&id) {
            continue;
        }
        let sample = slot.conflicts.entry(id).or_default();
        sample.count += 1;
        if touched_otherwise {
            sample.others += 1;
        } else if op.is_some() {
            sample.by_op += 1;
        }
        if op.is_some() {
            sample.op = op;
        }
    }
}

/// Moves to the next phase: joined → split, or split → reconciliation → joined. The caller holds
/// the coordinator's role; `me` is the coordinating worker's state, if a worker coordinates.
pub(super) fn change_phase(
    db: &Database<Doppel>,
    role: &MutexGuard<'_, ()>,
    me: Option<&mut TxState<TidWord>>,
) {
    match phase::kind(db.phases.published()) {
        JOINED => start_split(db, role, me),
        _ => reconcile_and_join(db, role, me),
    }
}

/// Stops every worker between transactions, chooses the split records from the joined phase's
/// conflict samples, and releases the workers into a split phase (or back into a joined phase if
/// nothing is worth splitting).
fn start_split(
    db: &Database<Doppel>,
    role: &MutexGuard<'_, ()>,
    me: Option<&mut TxState<TidWord>>,
) {
    let phases = &db.phases;
    let p = phases.publish_and_wait(
        role,
        SPLIT_PHASE,
        &db.activity,
        me.as_ref().map(|m| m.slot),
        |_| {},
    );
    let mut coord = db.shared.coord.lock();
    let labels = choose_split(db, &mut coord);
    let high = db.activity.high();
    // SAFETY: every worker is stopped at the barrier (or claimed): the coordinator owns the shared
    // split state until it releases them.
    let entries = unsafe { db.shared.entries.get_mut() };
    entries.clear();
    let guard = phasedb_storage::pin();
    let mut words = SLICE_PAD;
    for label in labels {
        let table = db.table(label.table);
        let Some(col) = table.schema().columns().get(label.col as usize) else {
            continue;
        };
        if !fits(label.kind, col.ty) {
            continue;
        }
        let Some(rec) = table.get(label.key, &guard) else {
            continue;
        };
        let meta = rec.meta(table.layout(), col.group);
        let word = meta.load();
        if word & (LOCK | ABSENT | UNLINKED | SPLIT) != 0 {
            continue;
        }
        let n = splittable::slice_words(col.ty);
        meta.0
            .store(SPLIT | entries.len() as u64, Ordering::Release);
        entries.push(SplitEntry {
            label,
            rec,
            group: col.group as u8,
            ty: col.ty,
            slice: words,
            words: n,
            pre_word: word,
        });
        words += n;
    }
    // SAFETY: as above.
    unsafe { db.shared.directory.get_mut() }.rebuild(entries);
    let next = if entries.is_empty() {
        coord.stats.skipped_splits += 1;
        phases.next_word(JOINED)
    } else {
        if let Some(d) = &db.durable {
            // Every transaction of the split phase commits in this epoch or a later one.
            d.logging.hold_from(db.epoch.current());
        }
        for slot in 0..high {
            // SAFETY: as above.
            let s = unsafe { db.shared.slot(slot) };
            s.slices.clear();
            s.slices.resize(words + SLICE_PAD, 0);
            s.samples.clear();
            s.samples.resize(entries.len(), Default::default());
            s.stashed = 0;
        }
        let stats = &mut coord.stats;
        stats.split_phases += 1;
        stats.split = entries.iter().map(|e| e.label).collect();
        stats.most_split = stats.most_split.max(entries.len());
        for e in entries.iter() {
            coord.ever.insert(e.label);
        }
        coord.stats.ever_split = coord.ever.len();
        p
    };
    phases.release(role, next);
    phases.schedule(db.config.phase_length);
    if let Some(m) = me {
        m.phase = next;
    }
}

/// The labels for the next split phase: manual labels, records that stay split, and the most
/// conflicted records (this joined phase's conflicts, plus earlier ones halved at each decision)
/// that ran a splittable operation. Takes the workers' samples.
fn choose_split(db: &Database<Doppel>, coord: &mut CoordState) -> Vec<SplitLabel> {
    let policy = &db.config.split;
    let mut labels: Vec<SplitLabel> = db.shared.manual.lock().clone();
    // Conflicts of earlier joined phases count half as much at each decision, so steady contention
    // too mild to show in one short phase still adds up.
    let merged = &mut coord.conflicts;
    merged.retain(|_, s| {
        s.count /= 2;
        s.by_op /= 2;
        s.others /= 2;
        s.count > 0
    });
    for slot in 0..db.activity.high() {
        // SAFETY: called at a barrier.
        let s = unsafe { db.shared.slot(slot) };
        for (id, sample) in s.conflicts.drain() {
            let m = merged.entry(id).or_default();
            m.count += sample.count;
            m.by_op += sample.by_op;
            m.others += sample.others;
            if sample.op.is_some() {
                m.op = sample.op;
            }
        }
    }
    let taken = |labels: &[SplitLabel], l: &SplitLabel| {
        labels
            .iter()
            .any(|m| (m.table, m.key, m.col) == (l.table, l.key, l.col))
    };
    coord.cooldown.tick();
    for l in std::mem::take(&mut coord.keep) {
        if !taken(&labels, &l) {
            labels.push(l);
        }
    }
    if policy.auto {
        let mut hot: Vec<(u64, SplitLabel, u8)> = merged
            .iter()
            .filter(|(_, s)| s.worth_splitting(policy))
            .filter_map(|(&(table, key, group), s)| {
                let (col, kind) = s.op?;
                Some((
                    s.count,
                    SplitLabel {
                        table,
                        key,
                        col,
                        kind,
                    },
                    group,
                ))
            })
            .collect();
        hot.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, l, group) in hot {
            if labels.len() >= policy.max_split {
                break;
            }
            if !taken(&labels, &l) && !coord.cooldown.cooling(&l) {
                labels.push(l);
                // Split now: from here on its split phases decide whether it stays split.
                merged.remove(&(l.table, l.key, group));
            }
        }
    }
    labels
}

/// Publishes the reconciliation phase, merges every worker's slices (each worker merges its own;
/// the coordinator merges for idle ones), gives the split records back their TID words, decides
/// which stay split, and releases everyone into the next joined phase.
fn reconcile_and_join(
    db: &Database<Doppel>,
    role: &MutexGuard<'_, ()>,
    me: Option<&mut TxState<TidWord>>,
) {
    let phases = &db.phases;
    let split_phase = phases.published();
    let me_slot = me.as_ref().map(|m| m.slot);
    phases.publish_and_wait(role, RECONCILE, &db.activity, me_slot, |slot| {
        reconcile::merge_slot(db, slot)
    });
    if let Some(slot) = me_slot {
        reconcile::merge_slot(db, slot);
    }
    let mut coord_guard = db.shared.coord.lock();
    let coord = &mut *coord_guard;
    let policy = &db.config.split;
    let high = db.activity.high();
    // SAFETY: every worker is stopped at the barrier (or claimed).
    let entries = unsafe { db.shared.entries.get_mut() };
    let epoch = db.epoch.current();
    for (i, e) in entries.iter().enumerate() {
        let mut seen = EntrySample::default();
        for slot in 0..high {
            // SAFETY: as above.
            if let Some(sample) = unsafe { db.shared.slot(slot) }.samples.get(i) {
                seen.absorb(sample);
            }
        }
        coord.stats.slice_ops += seen.ops;
        let manual = db
            .shared
            .manual
            .lock()
            .iter()
            .any(|l| (l.table, l.key, l.col) == (e.label.table, e.label.key, e.label.col));
        if !manual && policy.auto {
            match seen.next_label(e.label, e.ty, policy) {
                Some(l) => {
                    coord.keep.push(l);
                    coord.cooldown.kept(&e.label);
                }
                // Reads (or too few operations) made the split phase cost more than it saved.
                // Stay reconciled for a while instead of being split again at the next conflicts.
                None => coord.cooldown.let_go(&e.label, policy),
            }
        }
        let layout = db.table(e.label.table).layout();
        let new_tid = (tid(e.pre_word) + 1).max(epoch << EPOCH_SHIFT);
        e.rec
            .meta(layout, e.group as usize)
            .0
            .store(new_tid, Ordering::Release);
        if db.config.record_history {
            reconcile::record_merge(db, e, new_tid, phase::seq(split_phase));
        }
        if let Some(d) = &db.durable {
            reconcile::log_merged(db, e, new_tid, &d.logging.logs[me_slot.unwrap_or(0)]);
        }
    }
    if let Some(d) = &db.durable {
        // The merged values are in a log buffer with TIDs of this epoch, after every transaction
        // of the split phase (all ended before the barrier).
        d.logging.release_at(epoch);
    }
    let mut stashed = 0;
    for slot in 0..high {
        // SAFETY: as above.
        let s = unsafe { db.shared.slot(slot) };
        stashed += s.stashed;
        s.stashed = 0;
    }
    coord.stats.stashed += stashed;
    coord.stats.hurried = db.shared.hurried.load(Ordering::Relaxed);
    entries.clear();
    // SAFETY: as above.
    unsafe { db.shared.directory.get_mut() }.clear();
    let stays_split = !coord.keep.is_empty() || !db.shared.manual.lock().is_empty();
    drop(coord_guard);
    let next = phases.next_word(JOINED);
    phases.release(role, next);
    phases.schedule(joined_length(
        db.config.phase_length,
        &db.config.split,
        stays_split,
        stashed,
    ));
    if let Some(m) = me {
        m.phase = next;
    }
}

/// How long the joined phase after a reconciliation lasts: the whole phase length when nothing stays
/// split (which puts off the next split phase), a share of it while records stay split, and the
/// shortest when the split phase stashed nothing (no stashed work waits for the joined phase, so the
/// split data goes back to its slices as soon as may be).
fn joined_length(
    length: Duration,
    policy: &SplitPolicy,
    stays_split: bool,
    stashed: u64,
) -> Duration {
    if !stays_split {
        length
    } else if stashed == 0 {
        SHORTEST_JOINED
    } else {
        length.mul_f64(policy.joined_share).max(SHORTEST_JOINED)
    }
}

/// Doppel's figures for reports.
pub(super) fn report(db: &Database<Doppel>) -> Vec<(&'static str, String)> {
    let stats = db.phase_stats();
    let mut split: Vec<String> = stats
        .split
        .iter()
        .take(8)
        .map(|l| format!("{}/{}.{}:{}", l.table, l.key, l.col, l.kind.name()))
        .collect();
    if stats.split.len() > 8 {
        split.push(format!("... ({} in all)", stats.split.len()));
    }
    vec![
        ("split phases", stats.split_phases.to_string()),
        (
            "joined phases without a split",
            stats.skipped_splits.to_string(),
        ),
        ("split phases hurried", stats.hurried.to_string()),
        ("records split last", split.join(" ")),
        ("most records split at once", stats.most_split.to_string()),
        ("records ever split", stats.ever_split.to_string()),
        ("operations on per-core slices", stats.slice_ops.to_string()),
        ("transactions stashed", stats.stashed.to_string()),
        ("phase changes overdue", stats.overdue.to_string()),
        (
            "coordinator wait at barriers",
            format!("{:.1} ms", stats.barrier_wait.as_secs_f64() * 1e3),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_joined_phase_is_shortest_when_the_split_phase_stashed_nothing() {
        let length = Duration::from_millis(20);
        let policy = SplitPolicy::default();
        assert_eq!(joined_length(length, &policy, false, 0), length);
        assert_eq!(joined_length(length, &policy, false, 9), length);
        assert_eq!(joined_length(length, &policy, true, 0), SHORTEST_JOINED);
        assert_eq!(
            joined_length(length, &policy, true, 1),
            Duration::from_millis(2),
            "a tenth of the phase length runs stashed work"
        );
        assert_eq!(
            joined_length(Duration::from_millis(1), &policy, true, 1),
            SHORTEST_JOINED
        );
    }
}
