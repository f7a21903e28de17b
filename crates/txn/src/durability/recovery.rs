//! Parallel log replay (SiloR §5.2): every log file of the generations after the checkpoint is
//! read and applied by its own thread; order does not matter, because each record reaches a
//! column group only if its TID is newer than the group's (the Thomas write rule of
//! `crate::star` `apply.rs`). A record's epoch (what the durable cut-off compares) is its Silo
//! TID's, or the one it carries: TicToc's TIDs are commit timestamps, which order a row's
//! versions as Silo TIDs do but hold no epoch.
//!
//! That holds for records that carry whole column groups (inserts, deletes, updates that wrote
//! every column of their groups). An update logs only the columns it wrote, and such a *partial*
//! image must not hide an older record's other columns of the group. So replay has two passes:
//! first every whole record, in any order (each group then holds its newest whole image, `F`);
//! then the partial records, sorted by row and TID and applied in that order per row, still with
//! the Thomas write rule. A column's newest writer is then what the group holds: a partial image
//! older than `F` is refused (`F` carries all its columns, newer), and the newer ones land in TID
//! order, each over the one before. Rows are split among threads for the second pass.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use phasedb_storage::TableId;

use super::DurabilityError;
use super::block::{self, Kind};
use super::checkpoint::Checkpoint;
use crate::database::Database;
use crate::protocol::Protocol;
use crate::star::Applied;
use crate::star::apply::apply_record;
use crate::star::format::{Decoder, Record, RecordKind};

/// A log file of a data directory, read and framed.
pub(crate) struct LogScan {
    pub path: PathBuf,
    pub generation: u64,
    pub logger: u64,
    pub bytes: Vec<u8>,
    /// Length of the trusted prefix (whole blocks).
    pub whole: usize,
    /// The last durable marker in the trusted prefix (0: none).
    pub marker: u64,
}

/// The name of logger `logger`'s file in segment `segment` of generation `generation`.
pub(crate) fn file_name(generation: u64, segment: u64, logger: usize) -> String {
    format!("log-{generation:08}-{logger:03}-{segment:06}.log")
}

/// The (generation, logger, segment) of a log file named by [`file_name`] (or by the first
/// layout, `log-<generation>-<logger>.log`, segment 0).
pub(crate) fn log_name(name: &str) -> Option<(u64, u64, u64)> {
    let rest = name.strip_prefix("log-")?.strip_suffix(".log")?;
    let mut parts = rest.split('-');
    let generation = parts.next()?.parse().ok()?;
    let logger = parts.next()?.parse().ok()?;
    let segment = parts.next().map_or(Some(0), |s| s.parse().ok())?;
    parts
        .next()
        .is_none()
        .then_some((generation, logger, segment))
}

/// The generation of a log file named by [`file_name`].
pub(crate) fn generation_of(name: &str) -> Option<u64> {
    log_name(name).map(|(g, _, _)| g)
}

/// Reads and frames every log file of `dir` of generation `from.0` from segment `from.1` on, or
/// of a later generation, in parallel.
pub(crate) fn scan(dir: &Path, from: (u64, u64)) -> Result<Vec<LogScan>, DurabilityError> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DurabilityError::io("list", dir, e))? {
        let entry = entry.map_err(|e| DurabilityError::io("list", dir, e))?;
        if let Some((g, l, s)) = entry.file_name().to_str().and_then(log_name)
            && (g, s) >= from
        {
            paths.push((entry.path(), g, l));
        }
    }
    paths.sort();
    parallel(&paths, |(path, generation, logger)| {
        let bytes = fs::read(path).map_err(|e| DurabilityError::io("read", path, e))?;
        let (blocks, whole) = block::read(&bytes);
        let marker = blocks
            .iter()
            .rev()
            .find(|(k, p)| *k == Kind::Durable && p.len() == 8)
            .map_or(0, |(_, p)| {
                u64::from_le_bytes((*p).try_into().expect("8 bytes"))
            });
        Ok(LogScan {
            path: path.clone(),
            generation: *generation,
            logger: *logger,
            bytes,
            whole,
            marker,
        })
    })
}

/// Per generation, the epoch durable on every one of its loggers: the smallest over loggers of
/// a logger's last marker (the largest over its segments' files: a logger's segments together
/// hold every record of its up to its last marker).
pub(crate) fn durable_epochs(logs: &[LogScan]) -> BTreeMap<u64, u64> {
    let mut per_logger = BTreeMap::new();
    for l in logs {
        per_logger
            .entry((l.generation, l.logger))
            .and_modify(|e: &mut u64| *e = (*e).max(l.marker))
            .or_insert(l.marker);
    }
    let mut d = BTreeMap::new();
    for (&(g, _), &m) in &per_logger {
        d.entry(g)
            .and_modify(|e: &mut u64| *e = (*e).min(m))
            .or_insert(m);
    }
    d
}

/// What replay did.
#[derive(Default)]
pub(crate) struct Replayed {
    pub applied: u64,
    pub dropped: u64,
    /// The most threads a pass ran on.
    pub threads: usize,
}

/// Replays `logs` over the checkpoint `base` loaded into `db`: a record of generation `g` is
/// applied if its epoch is at most `durable[g]` and, in the checkpoint's own generation, not
/// before the checkpoint's start epoch.
pub(crate) fn replay<P: Protocol>(
    db: &Database<P>,
    logs: &[LogScan],
    durable: &BTreeMap<u64, u64>,
    base: &Checkpoint,
) -> Result<Replayed, DurabilityError> {
    let whole_pass = parallel(logs, |log| {
        let d = durable[&log.generation];
        let from = if log.generation == base.start.generation {
            base.start.epoch
        } else {
            0
        };
        let schema_of = |t: TableId| db.tables.get(t as usize).map(|t| t.schema());
        let guard = phasedb_storage::pin();
        let mut row = vec![0u64; db.max_row_words()];
        let mut tombstones = VecDeque::new();
        let mut out = Applied::default();
        let mut done = Replayed::default();
        let mut partial = Vec::new();
        for (kind, payload) in block::read(&log.bytes[..log.whole]).0 {
            if kind != Kind::Records {
                continue;
            }
            for r in Decoder::new(payload, schema_of).unbounded().with_epochs() {
                let r = r.map_err(|e| DurabilityError::Corrupt {
                    path: log.path.clone(),
                    detail: e.to_string(),
                })?;
                let e = r.epoch();
                if e > d || e < from {
                    done.dropped += 1;
                    continue;
                }
                done.applied += 1;
                if is_whole(db, &r) {
                    apply_record(db, &r, &guard, &mut row, &mut out, &mut tombstones);
                } else {
                    partial.push(r);
                }
            }
        }
        db.adopt_limbo(&mut tombstones);
        Ok((done, partial))
    })?;
    let mut total = Replayed {
        threads: threads_for(logs.len()),
        ..Replayed::default()
    };
    let mut partial = Vec::new();
    for (done, p) in whole_pass {
        total.applied += done.applied;
        total.dropped += done.dropped;
        partial.extend(p);
    }
    if !partial.is_empty() {
        total.threads = total.threads.max(threads_for(partial.len()));
    }
    replay_partial(db, partial)?;
    Ok(total)
}

/// Whether `r` carries whole column groups (or is a delete): its place among a row's records
/// does not matter.
fn is_whole<P: Protocol>(db: &Database<P>, r: &Record<'_>) -> bool {
    if r.kind == RecordKind::Delete {
        return true;
    }
    let schema = db.table(r.table).schema();
    let mut groups = schema.groups_of(r.columns);
    let mut covered = 0;
    while groups != 0 {
        let g = groups.trailing_zeros() as usize;
        groups &= groups - 1;
        covered |= schema.groups()[g].columns;
    }
    covered == r.columns
}

/// The second pass: partial images sorted by row and TID, the rows cut into one run per thread
/// (a row's records never split), each run applied in order.
fn replay_partial<P: Protocol>(
    db: &Database<P>,
    mut partial: Vec<Record<'_>>,
) -> Result<(), DurabilityError> {
    if partial.is_empty() {
        return Ok(());
    }
    partial.sort_unstable_by_key(|r| (r.table, r.key, r.tid));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let target = partial.len().div_ceil(threads);
    let mut runs: Vec<&[Record<'_>]> = Vec::with_capacity(threads);
    let mut rest = &partial[..];
    while !rest.is_empty() {
        let mut end = target.min(rest.len());
        while end < rest.len()
            && (rest[end].table, rest[end].key) == (rest[end - 1].table, rest[end - 1].key)
        {
            end += 1;
        }
        let (run, tail) = rest.split_at(end);
        runs.push(run);
        rest = tail;
    }
    parallel(&runs, |run| {
        let guard = phasedb_storage::pin();
        let mut row = vec![0u64; db.max_row_words()];
        let mut tombstones = VecDeque::new();
        let mut out = Applied::default();
        for r in run.iter() {
            apply_record(db, r, &guard, &mut row, &mut out, &mut tombstones);
        }
        db.adopt_limbo(&mut tombstones);
        Ok(())
    })?;
    Ok(())
}

/// The threads [`parallel`] runs `items` items on: one per core, at most one per item.
fn threads_for(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items)
        .max(1)
}

/// Runs `f` on every item on up to one thread per core; the results in item order, or the first
/// error.
fn parallel<'a, T: Sync, R: Send>(
    items: &'a [T],
    f: impl Fn(&'a T) -> Result<R, DurabilityError> + Sync,
) -> Result<Vec<R>, DurabilityError> {
    let threads = threads_for(items.len());
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Result<R, DurabilityError>>> =
        (0..items.len()).map(|_| None).collect();
    let done = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, f(item)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("recovery thread panicked"))
            .collect::<Vec<_>>()
    });
    for (i, r) in done {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}
