//! Starting durable operation: check the directory, recover or write the first image, open a new
//! log generation and start the loggers.

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::checkpoint::{self, sync_dir};
use super::logger::LogFile;
use super::recovery::{self, file_name, generation_of};
use super::{DurabilityError, Loggers, Logging, Recovery, manifest};
use crate::database::{Database, Durable, MAX_WORKERS};
use crate::protocol::Protocol;
use crate::tid::TidWord;

/// See [`Database::start_durability`].
pub(crate) fn start<P: Protocol<Meta = TidWord>>(
    db: &mut Database<P>,
) -> Result<Recovery, DurabilityError> {
    let started = Instant::now();
    let cfg = db
        .config
        .durability
        .clone()
        .ok_or(DurabilityError::NotConfigured)?;
    if db.durable.is_some() {
        return Err(DurabilityError::AlreadyStarted);
    }
    if cfg.loggers == 0 {
        return Err(DurabilityError::NoLoggers);
    }
    if db.config.epoch_interval.is_zero() {
        return Err(DurabilityError::NoEpochs);
    }
    let dir = cfg.dir.as_path();
    fs::create_dir_all(dir).map_err(|e| DurabilityError::io("create", dir, e))?;
    let mut report = Recovery::default();
    let generation = if dir.join(manifest::NAME).exists() {
        recover(db, dir, &mut report)?
    } else {
        clear_interrupted_start(dir)?;
        report.fresh = true;
        checkpoint::write(dir, 1, &db.tables, 1, db.epoch.current())?;
        manifest::write(dir, &db.tables)?;
        sync_dir(dir)?;
        1
    };
    let mut files = Vec::with_capacity(cfg.loggers);
    for l in 0..cfg.loggers {
        let path = dir.join(file_name(generation, l));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| DurabilityError::io("create", &path, e))?;
        files.push(LogFile::new(file, cfg.fsync, cfg.disk_limit_bytes));
    }
    sync_dir(dir)?;
    // Everything before the current epoch is in the checkpoint just written.
    let durable = db.epoch.current() - 1;
    let logging = Arc::new(Logging::new(MAX_WORKERS, cfg.loggers, durable));
    let loggers = Loggers::start(
        logging.clone(),
        db.activity.clone(),
        db.epoch.reader(),
        files,
        durable,
    );
    db.durable = Some(Durable { logging, loggers });
    report.table_records = db
        .tables
        .iter()
        .map(|t| (t.name().to_string(), t.len() as u64))
        .collect();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Recovers the database in `dir` into `db` (replacing rows loaded before), writes a checkpoint
/// of the result and truncates what is no longer needed; returns the new log generation.
fn recover<P: Protocol<Meta = TidWord>>(
    db: &mut Database<P>,
    dir: &Path,
    report: &mut Recovery,
) -> Result<u64, DurabilityError> {
    manifest::check(dir, &db.tables)?;
    let checkpoints = checkpoint::list(dir)?;
    let mut chosen = None;
    for c in &checkpoints {
        match checkpoint::verify(c, &db.tables) {
            Ok(files) => {
                chosen = Some((c.clone(), files));
                break;
            }
            Err(why) => report
                .skipped_checkpoints
                .push(format!("checkpoint {}: {why}", c.seq)),
        }
    }
    let Some((base, files)) = chosen else {
        return Err(DurabilityError::NoCheckpoint {
            dir: dir.to_path_buf(),
            detail: if report.skipped_checkpoints.is_empty() {
                "none was written".into()
            } else {
                report.skipped_checkpoints.join("; ")
            },
        });
    };
    db.reset_tables();
    report.checkpoint = Some(base.seq);
    report.checkpoint_rows = checkpoint::load(&files, &db.tables);
    drop(files);
    let replay_started = Instant::now();
    let logs = recovery::scan(dir, base.generation)?;
    report.torn_bytes = logs.iter().map(|l| (l.bytes.len() - l.whole) as u64).sum();
    let durable = recovery::durable_epochs(&logs);
    let replayed = recovery::replay(db, &logs, &durable, &base)?;
    drop(logs);
    report.replay_seconds = replay_started.elapsed().as_secs_f64();
    report.log_records = replayed.applied;
    report.dropped_records = replayed.dropped;
    let newest = durable
        .values()
        .copied()
        .max()
        .unwrap_or(0)
        .max(base.start_epoch.saturating_sub(1));
    report.durable_epoch = newest;
    // New TIDs must be above every recovered one, so later recoveries order them after.
    db.epoch.set(newest.max(base.start_epoch) + 1);
    let generation = durable
        .keys()
        .copied()
        .chain(checkpoints.iter().map(|c| c.generation))
        .max()
        .unwrap_or(0)
        + 1;
    let seq = checkpoints.iter().map(|c| c.seq).max().unwrap_or(0) + 1;
    checkpoint::write(dir, seq, &db.tables, generation, db.epoch.current())?;
    truncate(dir, &[seq, base.seq], base.generation)?;
    Ok(generation)
}

/// Deletes checkpoints other than `keep`, unfinished ones, and log files of generations before
/// `oldest_needed` (the generation of the older checkpoint kept, which recovery falls back to).
fn truncate(dir: &Path, keep: &[u64], oldest_needed: u64) -> Result<(), DurabilityError> {
    let keep: Vec<String> = keep.iter().map(|&s| checkpoint::dir_name(s)).collect();
    for entry in fs::read_dir(dir).map_err(|e| DurabilityError::io("list", dir, e))? {
        let entry = entry.map_err(|e| DurabilityError::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with("ckpt-") && !keep.contains(&name) {
            fs::remove_dir_all(&path).map_err(|e| DurabilityError::io("remove", &path, e))?;
        } else if generation_of(&name).is_some_and(|g| g < oldest_needed) {
            fs::remove_file(&path).map_err(|e| DurabilityError::io("remove", &path, e))?;
        }
    }
    sync_dir(dir)
}

/// A directory without a manifest: empty, or left by a first start that did not finish (only
/// checkpoint and log names), which is cleared; anything else is refused.
fn clear_interrupted_start(dir: &Path) -> Result<(), DurabilityError> {
    let mut ours = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| DurabilityError::io("list", dir, e))? {
        let entry = entry.map_err(|e| DurabilityError::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("ckpt-") || generation_of(&name).is_some() {
            ours.push(entry.path());
        } else {
            return Err(DurabilityError::NotADataDirectory(dir.to_path_buf()));
        }
    }
    for path in ours {
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(|e| DurabilityError::io("remove", &path, e))?;
    }
    Ok(())
}
