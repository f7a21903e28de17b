//! Starting durable operation: check the directory, recover or write the first image, open a new
//! log generation and start the loggers.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::checkpoint::{self, Start, sync_dir};
use super::checkpointer::{Checkpointer, Context};
use super::logger::LogFile;
use super::recovery::{self, generation_of, log_name};
use super::{DurabilityError, Loggers, Logging, Recovery, manifest};
use crate::database::{Database, Durable, MAX_WORKERS};
use crate::protocol::Protocol;
use phasedb_storage::TableId;

/// See [`Database::start_durability`].
pub(crate) fn start<P: Protocol>(db: &mut Database<P>) -> Result<Recovery, DurabilityError> {
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
    let threads = cfg.checkpoint_threads.max(1);
    // No worker runs yet: the images written at start use every core.
    let start_threads =
        std::thread::available_parallelism().map_or(threads, |n| n.get().max(threads));
    let (seq, start) = if dir.join(manifest::NAME).exists() {
        recover(db, dir, start_threads, &mut report)?
    } else {
        clear_interrupted_start(dir)?;
        report.fresh = true;
        let start = Start {
            generation: 1,
            segment: 0,
            epoch: db.epoch.current(),
        };
        let never = AtomicBool::new(false);
        checkpoint::write(dir, 1, &db.tables, start_threads, start, &never, || Ok(()))?;
        manifest::write(dir, &db.tables, |t| db.granularity.is_auto(t as TableId))?;
        sync_dir(dir)?;
        (1, start)
    };
    let generation = start.generation;
    let files = (0..cfg.loggers)
        .map(|l| LogFile::create(dir, generation, 0, l, cfg.fsync, cfg.disk_limit_bytes))
        .collect::<Result<Vec<_>, _>>()?;
    sync_dir(dir)?;
    // Everything before the current epoch is in the checkpoint just written.
    let durable = db.epoch.current() - 1;
    let logging = Arc::new(Logging::new(MAX_WORKERS, cfg.loggers, durable));
    let loggers = Loggers::start(
        logging.clone(),
        db.activity.clone(),
        (db.epoch.reader(), logger_pace(db.config.epoch_interval)),
        files,
        (dir, generation),
        durable,
    );
    let checkpointer = Checkpointer::start(Context {
        tables: db.tables.clone(),
        layout_gate: db.granularity.layout_gate.clone(),
        logging: logging.clone(),
        activity: db.activity.clone(),
        epoch: db.epoch.reader(),
        dir: dir.to_path_buf(),
        generation,
        threads,
        interval: cfg.checkpoint_interval,
        wait_limit: cfg.checkpoint_wait_limit,
        newest: (seq, start),
    });
    db.durable = Some(Durable {
        checkpointer,
        logging,
        loggers,
    });
    report.table_records = db
        .tables
        .iter()
        .map(|t| (t.name().to_string(), t.len() as u64))
        .collect();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// How long a logger may wait between rounds within one epoch (a quarter epoch): bounds what the
/// workers' buffers hold between rounds; markers come with the rounds at each epoch change.
fn logger_pace(epoch: std::time::Duration) -> std::time::Duration {
    (epoch / 4).max(std::time::Duration::from_millis(1))
}

/// Recovers the database in `dir` into `db` (replacing rows loaded before), writes a checkpoint
/// of the result and truncates what is no longer needed; returns the checkpoint written and
/// where replay over it starts (segment 0 of a new log generation).
fn recover<P: Protocol>(
    db: &mut Database<P>,
    dir: &Path,
    threads: usize,
    report: &mut Recovery,
) -> Result<(u64, Start), DurabilityError> {
    let auto = |t: usize| db.granularity.is_auto(t as TableId);
    manifest::check(dir, &db.tables, auto)?;
    let checkpoints = checkpoint::list(dir)?;
    let mut chosen = None;
    for c in &checkpoints {
        let verified = checkpoint::layouts(c, db.specs(), auto)
            .and_then(|layouts| Ok((layouts, checkpoint::verify(c, &db.tables)?)));
        match verified {
            Ok((layouts, files)) => {
                chosen = Some((c.clone(), layouts, files));
                break;
            }
            Err(why) => report
                .skipped_checkpoints
                .push(format!("checkpoint {}: {why}", c.seq)),
        }
    }
    let Some((base, layouts, files)) = chosen else {
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
    // Automatic groups come back as the image was written: its rows' TIDs are per group, and the
    // logs replay over them by columns whatever groups they were written in.
    let guard = phasedb_storage::pin();
    for (table, schema) in db.tables.iter().zip(layouts) {
        if let Some(schema) = schema {
            table
                .regroup(schema, &guard, |_, _| true, |_, _| P::new_meta(0))
                .expect("checked against the table's columns");
        }
    }
    drop(guard);
    report.checkpoint = Some(base.seq);
    report.checkpoint_rows = checkpoint::load(&files, &db.tables, P::new_meta);
    drop(files);
    let replay_started = Instant::now();
    let logs = recovery::scan(dir, (base.start.generation, base.start.segment))?;
    report.torn_bytes = logs.iter().map(|l| (l.bytes.len() - l.whole) as u64).sum();
    let durable = recovery::durable_epochs(&logs);
    let replayed = recovery::replay(db, &logs, &durable, &base)?;
    drop(logs);
    report.replay_seconds = replay_started.elapsed().as_secs_f64();
    report.log_records = replayed.applied;
    report.dropped_records = replayed.dropped;
    report.replay_threads = replayed.threads;
    let newest = durable
        .values()
        .copied()
        .max()
        .unwrap_or(0)
        .max(base.start.epoch.saturating_sub(1));
    report.durable_epoch = newest;
    // New TIDs must be above every recovered one, so later recoveries order them after.
    db.epoch.set(newest.max(base.start.epoch) + 1);
    let generation = durable
        .keys()
        .copied()
        .chain(checkpoints.iter().map(|c| c.start.generation))
        .max()
        .unwrap_or(0)
        + 1;
    let seq = checkpoints.iter().map(|c| c.seq).max().unwrap_or(0) + 1;
    let start = Start {
        generation,
        segment: 0,
        epoch: db.epoch.current(),
    };
    let never = AtomicBool::new(false);
    checkpoint::write(dir, seq, &db.tables, threads, start, &never, || Ok(()))?;
    truncate(
        dir,
        &[seq, base.seq],
        (base.start.generation, base.start.segment),
    )?;
    Ok((seq, start))
}

/// Deletes checkpoints other than `keep`, unfinished ones, and log files older than
/// `oldest_needed` (generation, segment): where the older checkpoint kept, which recovery falls
/// back to, starts. Returns the number of files and directories removed.
pub(crate) fn truncate(
    dir: &Path,
    keep: &[u64],
    oldest_needed: (u64, u64),
) -> Result<u64, DurabilityError> {
    let keep: Vec<String> = keep.iter().map(|&s| checkpoint::dir_name(s)).collect();
    let mut removed = 0;
    for entry in fs::read_dir(dir).map_err(|e| DurabilityError::io("list", dir, e))? {
        let entry = entry.map_err(|e| DurabilityError::io("list", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with("ckpt-") && !keep.contains(&name) {
            fs::remove_dir_all(&path).map_err(|e| DurabilityError::io("remove", &path, e))?;
            removed += 1;
        } else if log_name(&name).is_some_and(|(g, _, s)| (g, s) < oldest_needed) {
            fs::remove_file(&path).map_err(|e| DurabilityError::io("remove", &path, e))?;
            removed += 1;
        }
    }
    sync_dir(dir)?;
    Ok(removed)
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
