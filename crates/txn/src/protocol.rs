use phasedb_storage::{Guard, RecordLayout, RecordPtr, TableId};

use crate::database::Database;
use crate::error::TxResult;
use crate::phase::PhaseWord;
use crate::splittable::SplitOp;
use crate::state::{CommitCtx, TxState};
use crate::tid::TidMeta;

/// A concurrency-control protocol: the metadata each column group of each record carries, how a
/// transaction reads and writes a group, and how it commits or aborts. The engine is generic over it
/// and monomorphised, so record accesses make no dynamic call.
pub trait Protocol: Sized + Send + Sync + 'static {
    /// Name used on the command line and in reports.
    const NAME: &'static str;
    /// Per-group record metadata; it holds a TID word with the group's status and version.
    type Meta: TidMeta;

    /// State the protocol keeps for the whole database (Doppel: split records and per-core slices).
    type Shared: Default + Send + Sync;
    /// Whether reads take shared locks (2PL): a splittable operation run as a read-modify-write then
    /// takes the write lock before it reads, instead of upgrading. Such a protocol's `on_write`
    /// returns only with the exclusive lock of every group it was given held (or an error), so the
    /// caller reads those groups without asking the protocol again.
    const READS_LOCK: bool = false;
    /// Whether the protocol orders transactions by age ([`TxState::ts`]: wait-die, SwissTM's
    /// contention manager); the worker then reads the clock at every transaction's start.
    const USES_AGE: bool = false;
    /// Whether the protocol runs in phases ([`crate::phase`]); the worker then follows them at each
    /// transaction boundary.
    const PHASED: bool = false;

    /// Starts durable operation (see [`Database::start_durability`]); protocols whose commit does
    /// not log, or whose metadata recovery cannot rebuild, refuse.
    fn start_durability(
        _db: &mut Database<Self>,
    ) -> Result<crate::durability::Recovery, crate::durability::DurabilityError> {
        Err(crate::durability::DurabilityError::Unsupported(
            Self::NAME,
            "its commits do not log",
        ))
    }

    /// Metadata holding the TID word `word` (see [`crate::tid`]) for a new record or placeholder.
    fn new_meta(word: u64) -> Self::Meta;

    /// Whether `read_group` may be asked for a part of a group (the words of the columns read), and
    /// copies just row words `first..first + words` then (see [`RecordPtr::copy_part`]). Otherwise
    /// it is always asked for whole groups.
    const PARTIAL_READS: bool = false;

    /// Copies group `g` of `rec` (its row words `first..first + words`) into `tx.row` consistently,
    /// with whatever the protocol needs (a lock, a version), and returns the TID word observed. A group
    /// whose word is absent need not be copied.
    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    fn read_group(
        tx: &mut TxState<Self::Meta>,
        db: &Database<Self>,
        table: TableId,
        rec: RecordPtr<Self::Meta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64>;

    /// Called when the transaction first buffers a write (update or delete) of the groups in `groups`
    /// of `rec`, write `write` of the write set; eager-locking protocols lock here.
    fn on_write(
        _tx: &mut TxState<Self::Meta>,
        _db: &Database<Self>,
        _table: TableId,
        _rec: RecordPtr<Self::Meta>,
        _layout: &RecordLayout,
        _groups: u32,
        _write: usize,
    ) -> TxResult<()> {
        Ok(())
    }

    /// Applies a splittable operation without buffering it, if the protocol does so (the `atomic`
    /// baseline); `None` lets the transaction run it as a read-modify-write.
    #[allow(clippy::too_many_arguments)]
    fn apply_in_place(
        _tx: &mut TxState<Self::Meta>,
        _db: &Database<Self>,
        _table: TableId,
        _key: u64,
        _col: usize,
        _op: SplitOp<'_>,
        _guard: &Guard,
    ) -> Option<TxResult<bool>> {
        None
    }

    /// Validates and installs the transaction's buffered writes, or returns the conflict that aborts it.
    /// Either way it leaves no lock held.
    fn commit(tx: &mut TxState<Self::Meta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()>;

    /// Whether everything the attempt read is still current. Asked when a procedure returns an error or
    /// panics: under optimistic protocols it may have acted on an inconsistent view, and then the
    /// attempt is retried as a conflict instead of reporting the error. Lock-based reads are always
    /// consistent.
    fn reads_valid(tx: &mut TxState<Self::Meta>, db: &Database<Self>, guard: &Guard) -> bool {
        crate::commit::validate(tx, db, guard).is_ok()
    }

    /// Releases whatever an attempt that will not commit still holds (locks taken while executing).
    fn abort(_tx: &mut TxState<Self::Meta>, _db: &Database<Self>) {}

    /// Work after an attempt, while the worker runs no transaction: unlinking records it deleted or
    /// placeholders it left behind.
    fn reclaim(tx: &mut TxState<Self::Meta>, db: &Database<Self>);

    /// Called after a conflict aborted an attempt (Doppel samples the contended records here).
    fn on_conflict(_tx: &mut TxState<Self::Meta>, _db: &Database<Self>) {}

    /// Phased protocols: the worker's own part of moving to phase `to`, at a transaction boundary.
    /// False puts off acknowledging it (the worker keeps running in its current phase).
    fn enter_phase(_tx: &mut TxState<Self::Meta>, _db: &Database<Self>, _to: PhaseWord) -> bool {
        true
    }

    /// Phased protocols: a change of phase is due and the caller holds the coordinator's role; `me`
    /// is the coordinating worker's state (`None` when the database settles with no worker running).
    fn coordinate(
        _db: &Database<Self>,
        _role: &parking_lot::MutexGuard<'_, ()>,
        _me: Option<&mut TxState<Self::Meta>>,
    ) {
    }

    /// Phased protocols: brings the database to a phase where every committed write is in the
    /// records themselves (Doppel: merges all per-core slices). Called with the coordinator's role
    /// while no worker runs a transaction.
    fn settle(_db: &Database<Self>, _role: &parking_lot::MutexGuard<'_, ()>) {}

    /// While recording: adds the committed transaction's operations on per-core slices to its event.
    fn record_split_ops(
        _db: &Database<Self>,
        _tx: &TxState<Self::Meta>,
        _event: &mut phasedb_check::TxnEvent,
    ) {
    }

    /// The protocol's own figures for reports, as name/value pairs.
    fn report(_db: &Database<Self>) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Phased protocols: whether a transaction stashed earlier may run in phase `p`.
    fn resumes_stashed(_p: PhaseWord) -> bool {
        true
    }
}
