//! Interactive transactions over a closure-based engine.
//!
//! The engine runs a transaction as one closure over `Tx`, to completion, retrying it on conflict;
//! it cannot keep a transaction open across network round trips. So an interactive transaction is
//! kept by the server as a *statement log*: each statement with the result the client was given.
//! Nothing is held in the engine between statements: no lock, no read set, no buffered write.
//!
//! - A statement runs as a transaction that replays the log's writes to the rows it touches (so it
//!   sees the transaction's own writes), runs the statement, records its result, and aborts:
//!   nothing is applied. Only those writes matter: an operation's result depends on its own rows
//!   alone (a key's, or a scan's range of keys), so the log keeps its writes indexed by row, and a
//!   statement replays the writes to its rows only. A transaction of `n` statements on distinct
//!   rows costs `O(n)` replays in all, not the `O(n^2)` of replaying every write each time.
//! - Commit runs one transaction that replays every statement in order and compares each result
//!   with the one the client was given; if all match it commits under the engine's protocol, which
//!   validates it like any other transaction, else it aborts with [`AbortCause::Stale`].
//!
//! Why this is serializable: the client's logic between statements could only depend on the
//! results it was given. The commit transaction is serializable under the engine's protocol and
//! observed exactly those results, so the interactive transaction is equivalent to that commit
//! transaction, placed at its serialization point. Comparing values rather than versions also
//! accepts a row rewritten with the value it had (the outcome is the same). A client that vanishes
//! mid-transaction leaves only its log, dropped with its connection: nothing to release, nothing
//! applied. The cost is that each statement replays the earlier writes to its rows, and commit the
//! whole log once.

use std::collections::BTreeMap;

use phasedb_proto::{AbortCause, Op, OpResult};
use phasedb_txn::{Protocol, TxError, Worker};

use crate::catalog::Catalog;
use crate::exec::{cause, is_read, run_op, validate};

/// Transaction-type indexes of the engine's statistics.
pub const TYPE_EXECUTE: usize = 0;
/// Statement transactions (always aborted on purpose; not counted in the stats replies).
pub const TYPE_STATEMENT: usize = 1;
/// Commits of interactive transactions.
pub const TYPE_COMMIT: usize = 2;
/// Stored procedures.
pub const TYPE_CALL: usize = 3;

/// One interactive transaction: its statements and their results.
#[derive(Default)]
pub struct Log {
    stmts: Vec<(Op, OpResult)>,
    /// The indexes in `stmts` of the writes to each row `(table, key)`, in order.
    writes: BTreeMap<(u32, u64), Vec<usize>>,
    /// Earlier writes replayed by statements so far.
    replayed: u64,
}

/// The row an operation reads or writes, or the range of rows a scan reads.
fn rows_of(op: &Op) -> (u32, u64, u64) {
    match *op {
        Op::Get { table, key, .. }
        | Op::Insert { table, key, .. }
        | Op::Update { table, key, .. }
        | Op::Put { table, key, .. }
        | Op::Delete { table, key }
        | Op::Apply { table, key, .. }
        | Op::Ordered { table, key, .. } => (table, key, key),
        Op::Scan { table, lo, hi, .. } => (table, lo, hi),
    }
}

/// A transaction that ended without committing.
#[derive(Debug)]
pub struct Aborted {
    pub cause: AbortCause,
    pub message: String,
}

impl Aborted {
    fn engine(e: &TxError) -> Aborted {
        Aborted {
            cause: cause(e),
            message: e.to_string(),
        }
    }
}

impl Log {
    /// Runs statement `op` of the transaction and returns its result; an error ends the
    /// transaction.
    pub fn statement<P: Protocol>(
        &mut self,
        worker: &mut Worker<'_, P>,
        catalog: &Catalog,
        op: Op,
    ) -> Result<OpResult, Aborted> {
        validate(&op, catalog).map_err(|message| Aborted {
            cause: AbortCause::Invalid,
            message,
        })?;
        let (table, lo, hi) = rows_of(&op);
        let mut earlier: Vec<usize> = if lo <= hi {
            self.writes
                .range((table, lo)..=(table, hi))
                .flat_map(|(_, ix)| ix.iter().copied())
                .collect()
        } else {
            Vec::new()
        };
        if lo != hi {
            earlier.sort_unstable();
        }
        self.replayed += earlier.len() as u64;
        let mut answer = None;
        let outcome = worker.execute(TYPE_STATEMENT, |tx| {
            answer = None;
            for &i in &earlier {
                run_op(tx, &self.stmts[i].0)?;
            }
            answer = Some(run_op(tx, &op)?);
            // Nothing of a statement is applied: the log carries it to the commit.
            Err(TxError::UserAbort)
        });
        match (outcome, answer) {
            (Err(TxError::UserAbort), Some(result)) => {
                if !is_read(&op) {
                    self.writes
                        .entry((table, lo))
                        .or_default()
                        .push(self.stmts.len());
                }
                self.stmts.push((op, result.clone()));
                Ok(result)
            }
            (Err(e), _) => Err(Aborted::engine(&e)),
            (Ok(()), _) => unreachable!("a statement transaction always aborts"),
        }
    }

    /// Statements so far.
    pub fn len(&self) -> usize {
        self.stmts.len()
    }

    /// Whether no statement ran yet.
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty()
    }

    /// Earlier writes that statements replayed so far (each statement replays those to its rows).
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Commits: replays the log in one transaction that checks every result is still the one the
    /// client was given.
    pub fn commit<P: Protocol>(
        self,
        worker: &mut Worker<'_, P>,
        catalog: &Catalog,
    ) -> Result<(), Aborted> {
        for (op, _) in &self.stmts {
            // A table dropped since the statement ran.
            validate(op, catalog).map_err(|message| Aborted {
                cause: AbortCause::Stale,
                message,
            })?;
        }
        let mut stale = None;
        let outcome = worker.execute(TYPE_COMMIT, |tx| {
            stale = None;
            for (i, (op, given)) in self.stmts.iter().enumerate() {
                if run_op(tx, op)? != *given {
                    stale = Some(i);
                    return Err(TxError::UserAbort);
                }
            }
            Ok(())
        });
        match (outcome, stale) {
            (Ok(()), _) => Ok(()),
            (Err(TxError::UserAbort), Some(i)) => Err(Aborted {
                cause: AbortCause::Stale,
                message: format!(
                    "statement {i} ({:?}) no longer gives the result it gave",
                    self.stmts[i].0
                ),
            }),
            (Err(e), _) => Err(Aborted::engine(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use phasedb_proto::{ColumnDef, ColumnKind, TableDef, Value};
    use phasedb_txn::{Config, Database, Occ};

    use super::*;
    use crate::catalog;

    fn put(key: u64, v: i64) -> Op {
        Op::Put {
            table: 0,
            key,
            values: vec![(0, Value::I64(v))],
        }
    }

    fn get(key: u64) -> Op {
        Op::Get {
            table: 0,
            key,
            columns: vec![],
        }
    }

    /// A long transaction: each statement replays only the earlier writes to its own rows, so
    /// the replays grow linearly with the statements, and every read sees the transaction's writes.
    #[test]
    fn statements_replay_only_the_writes_to_their_rows() {
        let mut db = Database::<Occ>::open(Config::default());
        let mut cat = Catalog::default();
        let def = TableDef {
            name: "t".into(),
            columns: vec![ColumnDef {
                name: "v".into(),
                kind: ColumnKind::I64,
                group: 0,
            }],
            capacity: 4096,
            ordered: true,
        };
        let id = db.create_table(catalog::spec(&def, &cat).unwrap());
        cat.add(id, def);
        let mut w = db.worker();
        let mut log = Log::default();
        let n = 2000u64;
        for k in 0..n {
            assert_eq!(
                log.statement(&mut w, &cat, put(k, k as i64)).unwrap(),
                OpResult::Done(false)
            );
            assert_eq!(
                log.statement(&mut w, &cat, put(k, -(k as i64))).unwrap(),
                OpResult::Done(true)
            );
            assert_eq!(
                log.statement(&mut w, &cat, get(k)).unwrap(),
                OpResult::Row(Some(vec![Value::I64(-(k as i64))]))
            );
        }
        // Each key's second put replays its first; each get replays both.
        assert_eq!(log.replayed(), 3 * n);
        let scan = Op::Scan {
            table: 0,
            lo: 10,
            hi: 19,
            limit: 100,
            columns: vec![],
        };
        let OpResult::Rows(rows) = log.statement(&mut w, &cat, scan).unwrap() else {
            panic!("a scan returns rows");
        };
        assert_eq!(rows.len(), 10);
        assert_eq!(log.replayed(), 3 * n + 20);
        let empty = Op::Scan {
            table: 0,
            lo: 9,
            hi: 3,
            limit: 100,
            columns: vec![],
        };
        assert_eq!(
            log.statement(&mut w, &cat, empty).unwrap(),
            OpResult::Rows(vec![])
        );
        assert_eq!(log.len(), 3 * n as usize + 2);
        log.commit(&mut w, &cat).unwrap();
        let mut check = Log::default();
        assert_eq!(
            check.statement(&mut w, &cat, get(n - 1)).unwrap(),
            OpResult::Row(Some(vec![Value::I64(1 - n as i64)]))
        );
    }
}
