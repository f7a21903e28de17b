//! Interactive transactions over a closure-based engine.
//!
//! The engine runs a transaction as one closure over `Tx`, to completion, retrying it on conflict;
//! it cannot keep a transaction open across network round trips. So an interactive transaction is
//! kept by the server as a *statement log*: each statement with the result the client was given.
//! Nothing is held in the engine between statements: no lock, no read set, no buffered write.
//!
//! - A statement runs as a transaction that replays the log's writes (so it sees the transaction's
//!   own writes), runs the statement, records its result, and aborts: nothing is applied.
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
//! applied. The cost is that each statement replays the writes before it, and commit the whole log.

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
        let mut answer = None;
        let outcome = worker.execute(TYPE_STATEMENT, |tx| {
            answer = None;
            for (earlier, _) in &self.stmts {
                if !is_read(earlier) {
                    run_op(tx, earlier)?;
                }
            }
            answer = Some(run_op(tx, &op)?);
            // Nothing of a statement is applied: the log carries it to the commit.
            Err(TxError::UserAbort)
        });
        match (outcome, answer) {
            (Err(TxError::UserAbort), Some(result)) => {
                self.stmts.push((op, result.clone()));
                Ok(result)
            }
            (Err(e), _) => Err(Aborted::engine(&e)),
            (Ok(()), _) => unreachable!("a statement transaction always aborts"),
        }
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
