//! `phasedb serve --data-dir DIR`: the server's database made durable by the engine's durability
//! layer (SiloR; `docs/durability.md`), whose set of tables is fixed once durable operation starts.
//!
//! A server's tables change while it runs, so the directory holds *generations*: `gen-N/` is a
//! durability-layer data directory for the tables made by `schema-N`, the server's table changes
//! so far (`CreateTable`, `DropTable` and setup `Call` requests, in order, as protocol frames), and
//! `CURRENT` names the live generation.
//!
//! - **Start**: replay `schema-N`'s changes on an empty database (setups create their tables
//!   without loading them), then start durability in `gen-N/`, which recovers the rows.
//! - **A change that adds tables** (engine threads paused, so nothing commits meanwhile): a new
//!   database gets the tables of every change so far plus the new ones, every row is copied into
//!   it, its durability starts in an empty `gen-N+1/` (writing a first checkpoint that holds
//!   every row), `schema-N+1` is written, and `CURRENT` is switched by an atomic rename. Only then
//!   is generation N dropped. A crash before the rename recovers generation N, which holds every
//!   acknowledged transaction; after it, generation N+1. The cost is a copy of the database per
//!   such change (and twice its memory for the moment).
//! - **Dropping a table** only marks it dropped: `schema-N` is rewritten (atomically) with the
//!   change, then the table's rows are deleted by logged transactions.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use phasedb_proto::{FrameReader, Request, Response, decode_request, encode_request};
use phasedb_txn::{Config, Database, Durability, Protocol, Recovery};
use phasedb_workloads::tpcc::schema::{MAX_HISTORY_ORIGIN, history_origin_of};

use crate::catalog::Catalog;
use crate::procedures::Installed;
use crate::schema;

/// A database, its catalog and its procedures.
pub struct Parts<P: Protocol> {
    pub db: Database<P>,
    pub catalog: Catalog,
    pub installed: Installed,
}

/// The data directory of a durable server.
pub struct DataDir {
    root: PathBuf,
    /// Fsync policy and loggers; its `dir` is replaced by each generation's.
    template: Durability,
    config: Config,
    generation: u64,
    changes: Vec<Request>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// Writes `bytes` to `path` durably and atomically (a synced temporary file renamed over it, then
/// the directory synced).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
    f.write_all(bytes).map_err(|e| io("write", &tmp, e))?;
    f.sync_all().map_err(|e| io("sync", &tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io("rename", &tmp, e))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("sync", dir, e))
}

fn encode_changes(changes: &[Request]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        encode_request(&mut out, i as u64, c);
    }
    out
}

fn decode_changes(path: &Path) -> Result<Vec<Request>, String> {
    let bytes = fs::read(path).map_err(|e| io("read", path, e))?;
    let mut reader = FrameReader::new(usize::MAX);
    reader.extend(&bytes);
    let mut changes = Vec::new();
    while let Some(frame) = reader
        .next_frame()
        .map_err(|e| format!("{}: {e}", path.display()))?
    {
        let (_, req) = decode_request(frame).map_err(|e| format!("{}: {e}", path.display()))?;
        changes.push(req);
    }
    if reader.pending() != 0 || changes.iter().any(|c| !schema::is_change(c)) {
        return Err(format!("{} is not a list of table changes", path.display()));
    }
    Ok(changes)
}

impl DataDir {
    fn gen_dir(&self, n: u64) -> PathBuf {
        self.root.join(format!("gen-{n}"))
    }

    fn schema_file(&self, n: u64) -> PathBuf {
        self.root.join(format!("schema-{n}"))
    }

    /// An empty database of generation `n`'s directory with `changes` replayed (no rows loaded).
    fn build<P: Protocol>(&self, n: u64, changes: &[Request]) -> Result<Parts<P>, String> {
        let mut config = self.config.clone();
        let mut durability = self.template.clone();
        durability.dir = self.gen_dir(n);
        config.durability = Some(durability);
        let mut parts = Parts {
            db: Database::<P>::open(config),
            catalog: Catalog::default(),
            installed: Installed::default(),
        };
        for c in changes {
            if let Response::Error { message, .. } = schema::apply(
                c,
                &mut parts.db,
                &mut parts.catalog,
                &mut parts.installed,
                false,
            ) {
                return Err(format!("replaying {c:?}: {message}"));
            }
        }
        Ok(parts)
    }

    /// Opens (or creates) the data directory `durability.dir` and recovers its database.
    pub fn open<P: Protocol>(
        durability: &Durability,
        config: Config,
    ) -> Result<(DataDir, Parts<P>, Recovery), String> {
        let root = durability.dir.clone();
        fs::create_dir_all(&root).map_err(|e| io("create", &root, e))?;
        let current = root.join("CURRENT");
        let (generation, fresh) = match fs::read_to_string(&current) {
            Ok(text) => (
                text.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{} does not hold a generation", current.display()))?,
                false,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let entries = fs::read_dir(&root).map_err(|e| io("list", &root, e))?;
                if entries.count() != 0 {
                    return Err(format!(
                        "{} is not a phasedb serve data directory (it holds other files and no \
                         CURRENT); use an empty or new directory",
                        root.display()
                    ));
                }
                (0, true)
            }
            Err(e) => return Err(io("read", &current, e)),
        };
        let mut dir = DataDir {
            root,
            template: durability.clone(),
            config,
            generation,
            changes: Vec::new(),
        };
        if fresh {
            write_atomic(&dir.schema_file(0), &[])?;
        } else {
            dir.changes = decode_changes(&dir.schema_file(generation))?;
        }
        let mut parts = dir.build::<P>(generation, &dir.changes)?;
        let recovery = match parts.db.start_durability() {
            Ok(r) => r,
            Err(e) => {
                if fresh {
                    // A refused protocol (or a failed first start) leaves the directory empty.
                    drop(parts);
                    let _ = fs::remove_dir_all(dir.gen_dir(0));
                    let _ = fs::remove_file(dir.schema_file(0));
                }
                return Err(format!("{}: {e}", dir.root.display()));
            }
        };
        if fresh {
            write_atomic(&current, b"0\n")?;
        }
        dir.remove_others();
        purge_dropped(&parts)?;
        parts.installed.tpcc_origin_base = origin_base(&parts)?;
        Ok((dir, parts, recovery))
    }

    /// Deletes what a crash in the middle of a switch left: every generation but the live one.
    fn remove_others(&self) {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return;
        };
        let live = [
            format!("gen-{}", self.generation),
            format!("schema-{}", self.generation),
            "CURRENT".to_string(),
        ];
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let ours = name.starts_with("gen-") || name.starts_with("schema-");
            if ours && !live.contains(&name) {
                let _ = fs::remove_dir_all(e.path()).or_else(|_| fs::remove_file(e.path()));
            }
        }
    }

    /// Applies change `req` to the live database and makes it durable before answering. An error
    /// response changes nothing.
    pub fn change<P: Protocol>(
        &mut self,
        db: &mut Database<P>,
        catalog: &mut Catalog,
        installed: &mut Installed,
        req: &Request,
    ) -> Response {
        let failed = |message: String| Response::Error {
            kind: phasedb_proto::ErrorKind::BadTable,
            message: format!("the data directory failed: {message}"),
        };
        if !schema::adds_tables(req) {
            // A drop: recorded first (a refused one is not), then applied.
            let known = match req {
                Request::DropTable(name) => catalog.find(name).is_some(),
                _ => false,
            };
            if known {
                let mut changes = self.changes.clone();
                changes.push(req.clone());
                let file = self.schema_file(self.generation);
                if let Err(m) = write_atomic(&file, &encode_changes(&changes)) {
                    return failed(m);
                }
                self.changes = changes;
            }
            return schema::apply(req, db, catalog, installed, true);
        }
        let next = self.generation + 1;
        let _ = fs::remove_dir_all(self.gen_dir(next));
        let mut fresh = match self.build::<P>(next, &self.changes) {
            Ok(p) => p,
            Err(m) => return failed(m),
        };
        let resp = schema::apply(
            req,
            &mut fresh.db,
            &mut fresh.catalog,
            &mut fresh.installed,
            true,
        );
        if matches!(resp, Response::Error { .. }) {
            return resp;
        }
        let dropped = catalog.dropped();
        for t in 0..db.tables().len() as u32 {
            if dropped.contains(&t) {
                continue;
            }
            let mut result = Ok(());
            db.for_each_row_quiescent(t, |key, row| {
                if result.is_ok() {
                    result = fresh.db.load_image(t, key, row.words());
                }
            });
            if let Err(e) = result {
                return failed(format!("copying table {t}: {e}"));
            }
        }
        let mut changes = self.changes.clone();
        changes.push(req.clone());
        // Epochs go on from the old database's, so a response held for an old epoch is released
        // once the new generation (whose first checkpoint holds every old commit) is durable.
        fresh.db.set_epoch(db.epoch() + 1);
        let switched = fresh
            .db
            .start_durability()
            .map_err(|e| e.to_string())
            .and_then(|_| write_atomic(&self.schema_file(next), &encode_changes(&changes)))
            .and_then(|()| {
                write_atomic(&self.root.join("CURRENT"), format!("{next}\n").as_bytes())
            });
        if let Err(m) = switched {
            drop(fresh);
            let _ = fs::remove_dir_all(self.gen_dir(next));
            let _ = fs::remove_file(self.schema_file(next));
            return failed(m);
        }
        fresh.installed.tpcc_origin_base = installed.tpcc_origin_base;
        // The old database is dropped here: its loggers finish (nothing is left to log) and stop.
        *db = fresh.db;
        *catalog = fresh.catalog;
        *installed = fresh.installed;
        self.generation = next;
        self.changes = changes;
        self.remove_others();
        resp
    }
}

/// Deletes the rows recovery brought back in dropped tables (a crash while a drop's deletions
/// ran, before they were durable, leaves some: unreachable, yet in every later checkpoint), makes
/// the deletions durable, and writes two checkpoints so no checkpoint kept holds those rows.
fn purge_dropped<P: Protocol>(parts: &Parts<P>) -> Result<(), String> {
    let mut worker = parts.db.worker();
    let mut purged = 0;
    for t in parts.catalog.dropped() {
        let mut keys = Vec::new();
        parts.db.for_each_row_quiescent(t, |key, _| keys.push(key));
        for chunk in keys.chunks(1000) {
            worker
                .execute(crate::interactive::TYPE_EXECUTE, |tx| {
                    for &k in chunk {
                        tx.delete(t, k)?;
                    }
                    Ok::<_, phasedb_txn::TxError>(())
                })
                .map_err(|e| format!("deleting the rows left in dropped table {t}: {e}"))?;
        }
        purged += keys.len();
    }
    if purged != 0 {
        // One worker committed them in order: the last one durable, all are.
        worker.wait_durable().map_err(|e| e.to_string())?;
        drop(worker);
        for _ in 0..2 {
            parts.db.checkpoint().map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The first engine-thread index whose TPC-C history numbers no recovered history row uses.
fn origin_base<P: Protocol>(parts: &Parts<P>) -> Result<usize, String> {
    let Some(tpcc) = &parts.installed.tpcc else {
        return Ok(0);
    };
    let mut highest = 0;
    parts
        .db
        .for_each_row_quiescent(tpcc.tables().history, |key, _| {
            highest = highest.max(history_origin_of(key));
        });
    if highest as usize + phasedb_txn::MAX_WORKERS >= MAX_HISTORY_ORIGIN as usize {
        return Err("the recovered TPC-C history table has used up its row numbers".into());
    }
    Ok(highest as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_proto::{ColumnDef, ColumnKind, Op, TableDef, Value};
    use phasedb_txn::Occ;

    /// A fresh directory under the system's temporary one, removed at the end.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(what: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("phasedb-{what}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn kv(name: &str) -> Request {
        Request::CreateTable(TableDef {
            name: name.into(),
            columns: vec![ColumnDef {
                name: "v".into(),
                kind: ColumnKind::U64,
                group: 0,
            }],
            capacity: 1 << 13,
            ordered: false,
        })
    }

    fn open(root: &Path) -> (DataDir, Parts<Occ>, Recovery) {
        DataDir::open::<Occ>(&Durability::new(root), Config::default()).expect("opens")
    }

    fn rows(parts: &Parts<Occ>, t: u32) -> usize {
        let mut n = 0;
        parts.db.for_each_row_quiescent(t, |_, _| n += 1);
        n
    }

    fn records(r: &Recovery, name: &str) -> u64 {
        r.table_records
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, c)| *c)
    }

    /// Runs `ops` as transactions of 500 and waits until they are durable.
    fn run(parts: &Parts<Occ>, ops: &[Op]) {
        let mut w = parts.db.worker();
        for chunk in ops.chunks(500) {
            w.execute(0, |tx| {
                for op in chunk {
                    crate::exec::run_op(tx, op)?;
                }
                Ok(())
            })
            .unwrap();
        }
        w.wait_durable().unwrap();
    }

    /// A crash while a dropped table's rows are being deleted leaves some of them recovered but
    /// unreachable; the next start deletes them, and no checkpoint it keeps holds them.
    #[test]
    fn rows_of_a_table_dropped_mid_deletion_do_not_survive_a_crash() {
        let root = TempDir::new("dropped-mid-deletion");
        let (mut dir, mut parts, _) = open(&root.0);
        let mut ids = Vec::new();
        for name in ["doomed", "kept"] {
            let Parts {
                db,
                catalog,
                installed,
            } = &mut parts;
            match dir.change(db, catalog, installed, &kv(name)) {
                Response::Table(info) => ids.push(info.id),
                other => panic!("{other:?}"),
            }
        }
        let (doomed, kept) = (ids[0], ids[1]);
        let puts: Vec<Op> = (0..2000u64)
            .flat_map(|k| {
                [doomed, kept].map(|table| Op::Put {
                    table,
                    key: k,
                    values: vec![(0, Value::U64(k))],
                })
            })
            .collect();
        run(&parts, &puts);
        let Parts {
            db,
            catalog,
            installed,
        } = &mut parts;
        let dropped = dir.change(db, catalog, installed, &Request::DropTable("doomed".into()));
        assert!(matches!(dropped, Response::Done), "{dropped:?}");
        // Half of the deletions became durable before the crash.
        let deletes: Vec<Op> = (0..1000u64)
            .map(|key| Op::Delete { table: doomed, key })
            .collect();
        run(&parts, &deletes);
        parts.db.crash();
        drop(dir);

        let (dir, parts, recovery) = open(&root.0);
        // Recovered: the 1000 rows left and the 1000 deletes' tombstones.
        assert_eq!(records(&recovery, "doomed"), 2000, "{recovery:?}");
        assert_eq!(rows(&parts, doomed), 0, "the start deleted them");
        assert_eq!(rows(&parts, kept), 2000);
        assert!(parts.catalog.find("doomed").is_none());
        parts.db.crash();
        drop(dir);

        let (_dir, parts, recovery) = open(&root.0);
        assert_eq!(records(&recovery, "doomed"), 0, "{recovery:?}");
        assert_eq!(rows(&parts, doomed), 0);
        assert_eq!(rows(&parts, kept), 2000);
    }
}
