//! Checkpoint images (SiloR §4.3): every table's rows with their TIDs, one file per table, in
//! the replication record format inside checksummed blocks.
//!
//! A checkpoint is written into `ckpt-<seq>.tmp/` and renamed to `ckpt-<seq>/` once every file and
//! its `meta` (generation and start epoch) are fsynced, so a complete directory is a complete
//! image. The image is read row by row with Silo's stable reads while workers may run (a *fuzzy*
//! checkpoint, as SiloR's): recovery loads it and then replays every log record from the
//! checkpoint's start epoch, and the Thomas write rule brings each column group to its newest
//! durable version. Each table is written by a thread of its own.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use phasedb_storage::{InsertOutcome, Table, TableId};

use super::DurabilityError;
use super::block::{self, Kind};
use crate::star::format::{self, Decoder, RecordKind};
use crate::tid::{ABSENT, TID_MASK, TidWord};

/// Bytes of row records gathered before they are written as one block.
const BLOCK_BYTES: usize = 1 << 20;

/// A complete checkpoint found in a data directory.
#[derive(Clone, Debug)]
pub(crate) struct Checkpoint {
    pub seq: u64,
    pub path: PathBuf,
    /// The log generation current when it was taken.
    pub generation: u64,
    /// Log records of `generation` from this epoch on are replayed over it.
    pub start_epoch: u64,
}

/// The name of checkpoint `seq`'s directory.
pub(crate) fn dir_name(seq: u64) -> String {
    format!("ckpt-{seq:08}")
}

/// Writes an image of `tables` as checkpoint `seq` of `dir`: `generation` and `start_epoch` say
/// which log records recovery replays over it. Returns the rows written.
pub(crate) fn write(
    dir: &Path,
    seq: u64,
    tables: &[Table<TidWord>],
    generation: u64,
    start_epoch: u64,
) -> Result<u64, DurabilityError> {
    let tmp = dir.join(format!("{}.tmp", dir_name(seq)));
    let io = |what: &str, e: std::io::Error| DurabilityError::io(what, &tmp, e);
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|e| io("remove a stale checkpoint", e))?;
    }
    fs::create_dir_all(&tmp).map_err(|e| io("create the checkpoint directory", e))?;
    let rows = std::thread::scope(|s| {
        let handles: Vec<_> = tables
            .iter()
            .enumerate()
            .map(|(t, table)| {
                let path = tmp.join(format!("t{t:04}.img"));
                s.spawn(move || write_table(&path, t as TableId, table))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("checkpoint writer panicked"))
            .sum::<Result<u64, DurabilityError>>()
    })?;
    let mut meta = Vec::new();
    let mut payload = generation.to_le_bytes().to_vec();
    payload.extend_from_slice(&start_epoch.to_le_bytes());
    block::push(&mut meta, Kind::Meta, &payload);
    write_synced(&tmp.join("meta"), &meta)?;
    sync_dir(&tmp)?;
    let done = dir.join(dir_name(seq));
    fs::rename(&tmp, &done).map_err(|e| io("rename the checkpoint into place", e))?;
    sync_dir(dir)?;
    Ok(rows)
}

/// Writes table `t`'s present rows: one upsert per row when all its groups hold one TID, else one
/// per group (each with its own TID).
fn write_table(path: &Path, t: TableId, table: &Table<TidWord>) -> Result<u64, DurabilityError> {
    let schema = table.schema();
    let layout = table.layout();
    let groups = schema.groups();
    let mut row = vec![0u64; schema.row_words()];
    let mut words = vec![0u64; groups.len()];
    let mut records = Vec::with_capacity(BLOCK_BYTES + 4096);
    let mut out = Vec::new();
    let mut file = File::create(path).map_err(|e| DurabilityError::io("create", path, e))?;
    let mut count = 0u64;
    let guard = phasedb_storage::pin();
    let mut failed = None;
    table.for_each(&guard, |key, rec| {
        if failed.is_some() {
            return;
        }
        for (g, group) in groups.iter().enumerate() {
            let out = &mut row[group.word..group.word + group.words];
            words[g] = stable_copy(rec.meta(layout, g), || rec.copy_group(layout, g, out));
        }
        // Absent (deleted, a placeholder) or being unlinked: not in the image.
        if words.iter().any(|w| w & ABSENT != 0) {
            return;
        }
        if words.iter().all(|&w| w == words[0]) {
            format::push_upsert(
                &mut records,
                schema,
                t,
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
                    t,
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
            if let Err(e) = file.write_all(&out) {
                failed = Some(e);
            }
            out.clear();
        }
    });
    drop(guard);
    if let Some(e) = failed {
        return Err(DurabilityError::io("write", path, e));
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
            && p.len() == 16
        {
            found.push(Checkpoint {
                seq,
                path,
                generation: u64::from_le_bytes(p[..8].try_into().expect("8 bytes")),
                start_epoch: u64::from_le_bytes(p[8..].try_into().expect("8 bytes")),
            });
        }
    }
    found.sort_by_key(|c| std::cmp::Reverse(c.seq));
    Ok(found)
}

/// Checks every file of checkpoint `c` (whole blocks, an end block, records that decode against
/// `tables`) without loading anything. Returns the files' bytes for [`load`].
pub(crate) fn verify(c: &Checkpoint, tables: &[Table<TidWord>]) -> Result<Vec<Vec<u8>>, String> {
    let mut files = Vec::with_capacity(tables.len());
    for t in 0..tables.len() {
        let path = c.path.join(format!("t{t:04}.img"));
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
                        if r.table as usize != t || r.kind != RecordKind::Upsert {
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

/// Loads verified checkpoint files into the empty `tables`, one thread per table; each row takes
/// its recorded TIDs. Returns the rows loaded.
pub(crate) fn load(files: &[Vec<u8>], tables: &[Table<TidWord>]) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|bytes| s.spawn(move || load_table(bytes, tables)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("checkpoint loader panicked"))
            .sum()
    })
}

fn load_table(bytes: &[u8], tables: &[Table<TidWord>]) -> u64 {
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
            match table.insert_with(r.key, &guard, |_| TidWord::new(r.tid), Some(&row)) {
                InsertOutcome::Inserted(_) => rows += 1,
                // A later group of a row whose groups hold different TIDs.
                InsertOutcome::Exists(rec) => {
                    rec.install_columns(table.layout(), schema, r.columns, &row);
                    let mut m = carried;
                    while m != 0 {
                        let g = m.trailing_zeros() as usize;
                        m &= m - 1;
                        rec.meta(table.layout(), g).store(r.tid);
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
