//! Checkpoint images (SiloR §4.3): every table's rows with their TIDs, one file per table, in
//! the replication record format inside checksummed blocks.
//!
//! A checkpoint is written into `ckpt-<seq>.tmp/` and renamed to `ckpt-<seq>/` once every file and
//! its `meta` (where log replay starts: generation, segment, epoch; and the number of files) are
//! fsynced, so a complete directory is a complete image. The image is read row by row with Silo's stable reads while workers may run (a *fuzzy*
//! checkpoint, as SiloR's): recovery loads it and then replays every log record from the
//! checkpoint's start epoch, and the Thomas write rule brings each column group to its newest
//! durable version. The tables are cut into parts (hash shards or key ranges,
//! `Table::for_each_in_part`) that a few writer threads share, each writing a file of its own
//! (SiloR writes a checkpoint in parallel per table range).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use phasedb_storage::{InsertOutcome, Table, TableId};

use super::DurabilityError;
use super::block::{self, Kind};
use crate::star::format::{self, Decoder, RecordKind};
use crate::tid::{ABSENT, TID_MASK, TidMeta, TidWord};

/// Bytes of row records gathered before they are written as one block.
const BLOCK_BYTES: usize = 1 << 20;

/// A complete checkpoint found in a data directory.
#[derive(Clone, Debug)]
pub(crate) struct Checkpoint {
    pub seq: u64,
    pub path: PathBuf,
    /// Where recovery from it starts in the logs.
    pub start: Start,
    /// Number of image files `p<k>.img`; `None` in the first layout (a file `t<table>.img` per
    /// table).
    pub files: Option<u64>,
    /// Each table's column groups when the image was written (each column's group), which
    /// recovery lays the tables out in before loading it; `None` in checkpoints from before
    /// automatic groups were durable (the tables' declared groups).
    pub groups: Option<Vec<Vec<usize>>>,
}

/// Which log records recovery replays over a checkpoint: those of log generation `generation`
/// from segment `segment` on (and of later generations), of epoch `epoch` or later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Start {
    pub generation: u64,
    pub segment: u64,
    pub epoch: u64,
}

/// The name of checkpoint `seq`'s directory.
pub(crate) fn dir_name(seq: u64) -> String {
    format!("ckpt-{seq:08}")
}

/// Writes an image of `tables` as checkpoint `seq` of `dir`, with `threads` writers sharing the
/// tables' parts (each writer a file of its own), and marks it complete once `ready` (called
/// after the image is written) says so. Returns the rows written. Gives up if `stop` turns true.
/// Also returns the seconds spent writing the image (before `ready`).
///
/// A checkpoint that fails (a full disk, `ready` or `stop`) removes its unfinished `.tmp`
/// directory: on a full disk the half-written image would otherwise hold the space the logs need
/// until the next complete checkpoint, which cannot be written either. The complete checkpoints
/// are untouched, so the newest stays the one recovery starts from.
pub(crate) fn write<M: TidMeta>(
    dir: &Path,
    seq: u64,
    tables: &[Table<M>],
    threads: usize,
    start: Start,
    stop: &AtomicBool,
    ready: impl FnOnce() -> Result<(), DurabilityError>,
) -> Result<(u64, f64), DurabilityError> {
    let tmp = dir.join(format!("{}.tmp", dir_name(seq)));
    let written = (|| {
        let started = std::time::Instant::now();
        // The caller keeps the layouts still (the layout gate) until the image is written.
        let groups: Vec<Vec<usize>> = (tables.iter())
            .map(|t| t.schema().group_of_columns())
            .collect();
        let io = |what: &str, e: std::io::Error| DurabilityError::io(what, &tmp, e);
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| io("remove a stale checkpoint", e))?;
        }
        fs::create_dir_all(&tmp).map_err(|e| io("create the checkpoint directory", e))?;
        let parts: Vec<(usize, usize)> = tables
            .iter()
            .enumerate()
            .flat_map(|(t, table)| (0..table.parts()).map(move |p| (t, p)))
            .collect();
        let threads = threads.clamp(1, parts.len().max(1));
        let next = AtomicUsize::new(0);
        let rows = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|k| {
                    let path = tmp.join(format!("p{k:03}.img"));
                    let (parts, next) = (&parts, &next);
                    s.spawn(move || write_parts(&path, tables, parts, next, stop))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("checkpoint writer panicked"))
                .sum::<Result<u64, DurabilityError>>()
        })?;
        let image_seconds = started.elapsed().as_secs_f64();
        ready()?;
        let mut meta = Vec::new();
        let mut payload = Vec::with_capacity(32);
        for v in [start.generation, start.epoch, start.segment, threads as u64] {
            payload.extend_from_slice(&v.to_le_bytes());
        }
        for g in &groups {
            payload.push(g.len() as u8);
            payload.extend(g.iter().map(|&g| g as u8));
        }
        block::push(&mut meta, Kind::Meta, &payload);
        write_synced(&tmp.join("meta"), &meta)?;
        sync_dir(&tmp)?;
        let done = dir.join(dir_name(seq));
        fs::rename(&tmp, &done).map_err(|e| io("rename the checkpoint into place", e))?;
        sync_dir(dir)?;
        Ok((rows, image_seconds))
    })();
    if written.is_err() && tmp.exists() {
        // Best effort: what is left is removed by the next start or checkpoint's truncation.
        let _ = fs::remove_dir_all(&tmp);
    }
    written
}

/// One writer: takes `(table, part)` items from `parts` until none is left, writing each part's
/// present rows to its file: one upsert per row when all its groups hold one TID, else one per
/// group (each with its own TID). A part's records are gathered under its lock and read after,
/// with Silo's stable reads, so the writer never waits for a committer while blocking inserts.
fn write_parts<M: TidMeta>(
    path: &Path,
    tables: &[Table<M>],
    parts: &[(usize, usize)],
    next: &AtomicUsize,
    stop: &AtomicBool,
) -> Result<u64, DurabilityError> {
    let width = tables
        .iter()
        .map(|t| t.schema().row_words())
        .max()
        .unwrap_or(0);
    let mut row = vec![0u64; width];
    let mut words = Vec::new();
    let mut gathered = Vec::new();
    let mut records = Vec::with_capacity(BLOCK_BYTES + 4096);
    let mut out = Vec::new();
    let mut file = File::create(path).map_err(|e| DurabilityError::io("create", path, e))?;
    let mut count = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(DurabilityError::Checkpoint(
                "the checkpoint was interrupted by a shutdown".into(),
            ));
        }
        let Some(&(t, part)) = parts.get(next.fetch_add(1, Ordering::Relaxed)) else {
            break;
        };
        let table = &tables[t];
        let schema = table.schema();
        let layout = table.layout();
        let groups = schema.groups();
        words.resize(groups.len(), 0);
        // A pin per part, so a long checkpoint does not hold back memory reclamation.
        let guard = phasedb_storage::pin();
        gathered.clear();
        table.for_each_in_part(part, &guard, |key, rec| gathered.push((key, rec)));
        for &(key, rec) in &gathered {
            for (g, group) in groups.iter().enumerate() {
                let out = &mut row[group.word..group.word + group.words];
                words[g] =
                    stable_copy(rec.meta(layout, g).tid(), || rec.copy_group(layout, g, out));
            }
            // Absent (deleted, a placeholder) or being unlinked: not in the image.
            if words.iter().any(|w| w & ABSENT != 0) {
                continue;
            }
            if words.iter().all(|&w| w == words[0]) {
                format::push_upsert(
                    &mut records,
                    schema,
                    t as TableId,
                    key,
                    words[0] & TID_MASK,
                    schema.all_columns(),
                    &row,
                );
            } else {
                for (g, group) in groups.iter().enumerate() {
                    format::push_upsert(
                        &mut records,
                        schema,
                        t as TableId,
                        key,
                        words[g] & TID_MASK,
                        group.columns,
                        &row,
                    );
                }
            }
            count += 1;
            if records.len() >= BLOCK_BYTES {
                block::push(&mut out, Kind::Rows, &records);
                records.clear();
                file.write_all(&out)
                    .map_err(|e| DurabilityError::io("write", path, e))?;
                out.clear();
            }
        }
    }
    if !records.is_empty() {
        block::push(&mut out, Kind::Rows, &records);
    }
    block::push(&mut out, Kind::End, &count.to_le_bytes());
    file.write_all(&out)
        .and_then(|()| file.sync_all())
        .map_err(|e| DurabilityError::io("write", path, e))?;
    Ok(count)
}

/// Silo's stable read of one group: waits out a committer, copies, and checks the word held still.
/// A group being unlinked reads as absent.
fn stable_copy(meta: &TidWord, mut copy: impl FnMut()) -> u64 {
    use crate::tid::{LOCK, UNLINKED};
    use std::sync::atomic::{Ordering, fence};
    loop {
        let before = meta.load();
        if before & UNLINKED != 0 {
            return ABSENT;
        }
        if before & LOCK != 0 {
            std::hint::spin_loop();
            continue;
        }
        copy();
        fence(Ordering::Acquire);
        if meta.0.load(Ordering::Relaxed) == before {
            return before;
        }
    }
}

/// The complete checkpoints of `dir`, newest first (a directory whose `meta` is unreadable is left
/// out; its files are checked when it is loaded).
pub(crate) fn list(dir: &Path) -> Result<Vec<Checkpoint>, DurabilityError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DurabilityError::io("list", dir, e))? {
        let entry = entry.map_err(|e| DurabilityError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ckpt-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(bytes) = fs::read(path.join("meta")) else {
            continue;
        };
        let (blocks, _) = block::read(&bytes);
        if let Some((Kind::Meta, p)) = blocks.first()
            && (p.len() == 16 || p.len() >= 32)
            && let Some(groups) = p
                .get(32..)
                .map_or(Some(None), |g| parse_groups(g).map(Some))
        {
            let word = |i: usize| u64::from_le_bytes(p[i * 8..i * 8 + 8].try_into().expect("8"));
            found.push(Checkpoint {
                seq,
                path,
                start: Start {
                    generation: word(0),
                    epoch: word(1),
                    segment: if p.len() >= 32 { word(2) } else { 0 },
                },
                files: (p.len() >= 32).then(|| word(3)),
                groups: groups.filter(|g: &Vec<Vec<usize>>| !g.is_empty()),
            });
        }
    }
    found.sort_by_key(|c| std::cmp::Reverse(c.seq));
    Ok(found)
}

/// The schema each table must be laid out in, once reset to `specs` (as created), to load
/// checkpoint `c`: `Some` for a table whose groups the checkpoint records differently (only a
/// table with automatic groups, `auto(table id)`, may change them); an error if they do not fit.
pub(crate) fn layouts(
    c: &Checkpoint,
    specs: &[phasedb_storage::TableSpec],
    auto: impl Fn(usize) -> bool,
) -> Result<Vec<Option<phasedb_storage::Schema>>, String> {
    let Some(groups) = &c.groups else {
        return Ok(vec![None; specs.len()]);
    };
    if groups.len() != specs.len() {
        return Err(format!(
            "it records the groups of {} tables, this database has {}",
            groups.len(),
            specs.len()
        ));
    }
    (specs.iter().zip(groups).enumerate())
        .map(|(i, (spec, g))| {
            if spec.schema.group_of_columns() == *g {
                return Ok(None);
            }
            if !auto(i) {
                return Err(format!(
                    "table {} has declared groups, and the checkpoint was written in others",
                    spec.name
                ));
            }
            (spec.schema.regrouped(g).map(Some)).map_err(|e| format!("table {}: {e}", spec.name))
        })
        .collect()
}

/// Each table's column groups as the meta block lists them after its four words: per table, a
/// column count and each column's group, one byte each. `None` if the list is cut short.
fn parse_groups(mut bytes: &[u8]) -> Option<Vec<Vec<usize>>> {
    let mut tables = Vec::new();
    while let Some((&n, rest)) = bytes.split_first() {
        let (cols, rest) = rest.split_at_checked(n as usize)?;
        tables.push(cols.iter().map(|&g| g as usize).collect());
        bytes = rest;
    }
    Some(tables)
}

/// Checks every file of checkpoint `c` (whole blocks, an end block, records that decode against
/// `tables`) without loading anything. Returns the files' bytes for [`load`].
pub(crate) fn verify<M: TidMeta>(
    c: &Checkpoint,
    tables: &[Table<M>],
) -> Result<Vec<Vec<u8>>, String> {
    let names: Vec<(String, Option<usize>)> = match c.files {
        Some(n) => (0..n).map(|k| (format!("p{k:03}.img"), None)).collect(),
        None => (0..tables.len())
            .map(|t| (format!("t{t:04}.img"), Some(t)))
            .collect(),
    };
    let mut files = Vec::with_capacity(names.len());
    for (name, only) in names {
        let path = c.path.join(name);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (blocks, end) = block::read(&bytes);
        if end != bytes.len() {
            return Err(format!("{}: corrupt block at byte {end}", path.display()));
        }
        let mut ended = None;
        let schema_of = |id: TableId| tables.get(id as usize).map(|t| t.schema());
        for (kind, payload) in &blocks {
            match kind {
                Kind::Rows if ended.is_none() => {
                    for r in Decoder::new(payload, schema_of)
                        .with_zero_tids()
                        .unbounded()
                    {
                        let r = r.map_err(|e| format!("{}: {e}", path.display()))?;
                        if only.is_some_and(|t| r.table as usize != t)
                            || r.kind != RecordKind::Upsert
                        {
                            return Err(format!("{}: a record of another table", path.display()));
                        }
                    }
                }
                Kind::End if ended.is_none() && payload.len() == 8 => {
                    ended = Some(u64::from_le_bytes((*payload).try_into().expect("8 bytes")));
                }
                _ => return Err(format!("{}: unexpected block {kind:?}", path.display())),
            }
        }
        if ended.is_none() {
            return Err(format!(
                "{}: no end block (incomplete image)",
                path.display()
            ));
        }
        files.push(bytes);
    }
    Ok(files)
}

/// Loads verified checkpoint files into the empty `tables`, one thread per file; each row takes
/// its recorded TIDs (in metadata made by `new_meta`, the protocol's). Returns the rows loaded.
pub(crate) fn load<M: TidMeta>(
    files: &[Vec<u8>],
    tables: &[Table<M>],
    new_meta: fn(u64) -> M,
) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|bytes| s.spawn(move || load_table(bytes, tables, new_meta)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("checkpoint loader panicked"))
            .sum()
    })
}

fn load_table<M: TidMeta>(bytes: &[u8], tables: &[Table<M>], new_meta: fn(u64) -> M) -> u64 {
    let schema_of = |id: TableId| tables.get(id as usize).map(|t| t.schema());
    let guard = phasedb_storage::pin();
    let mut rows = 0;
    let mut row = Vec::new();
    for (kind, payload) in block::read(bytes).0 {
        if kind != Kind::Rows {
            continue;
        }
        for r in Decoder::new(payload, schema_of)
            .with_zero_tids()
            .unbounded()
            .flatten()
        {
            let table = &tables[r.table as usize];
            let schema = table.schema();
            row.resize(schema.row_words(), 0);
            crate::star::apply::unpack(schema, r.columns, r.data, &mut row);
            let carried = schema.groups_of(r.columns);
            match table.insert_with(r.key, &guard, |_| new_meta(r.tid), Some(&row)) {
                InsertOutcome::Inserted(_) => rows += 1,
                // A later group of a row whose groups hold different TIDs.
                InsertOutcome::Exists(rec) => {
                    rec.install_columns(table.layout(), schema, r.columns, &row);
                    let mut m = carried;
                    while m != 0 {
                        let g = m.trailing_zeros() as usize;
                        m &= m - 1;
                        rec.meta(table.layout(), g).tid().store(r.tid);
                    }
                }
            }
        }
    }
    rows
}

/// Writes `bytes` to a new file at `path` and fsyncs it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), DurabilityError> {
    File::create(path)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .map_err(|e| DurabilityError::io("write", path, e))
}

/// Fsyncs a directory, so the names created or renamed in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), DurabilityError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| DurabilityError::io("fsync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_storage::{ColumnType, Schema, TableSpec};

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut n: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn a_failed_checkpoint_removes_its_unfinished_image_and_leaves_the_previous_one_whole() {
        let dir = std::env::temp_dir().join(format!("phasedb-ckpt-failed-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let schema = Schema::builder()
            .column("v", ColumnType::U64, 0)
            .build()
            .unwrap();
        let tables = [Table::<TidWord>::new(0, TableSpec::new("t", schema, 16))];
        let start = Start {
            generation: 1,
            segment: 0,
            epoch: 1,
        };
        let never = AtomicBool::new(false);
        write(&dir, 1, &tables, 2, start, &never, || Ok(())).unwrap();
        // The image of checkpoint 2 is written, then it fails (as a full disk fails `meta`).
        let mut image_written = false;
        let failed = write(&dir, 2, &tables, 2, start, &never, || {
            image_written = dir.join("ckpt-00000002.tmp").join("p000.img").exists();
            Err(DurabilityError::Checkpoint("no space left".into()))
        });
        assert!(image_written);
        assert!(failed.is_err());
        assert_eq!(names(&dir), ["ckpt-00000001"]);
        let listed = list(&dir).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].seq, listed[0].start), (1, start));
        assert!(verify(&listed[0], &tables).is_ok());
        let _ = fs::remove_dir_all(&dir);
    }
}
