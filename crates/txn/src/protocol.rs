use phasedb_storage::{RecordLayout, RecordPtr};

use crate::database::Database;

use crate::error::TxResult;
use crate::state::{CommitCtx, TxState};

/// A concurrency-control protocol: the metadata each column group of each record carries, how a
/// transaction reads a group, and how it commits. The engine is generic over it and monomorphised, so
/// record accesses make no dynamic call.
pub trait Protocol: Sized + Send + Sync + 'static {
    /// Name used on the command line and in reports.
    const NAME: &'static str;
    /// Per-group record metadata.
    type Meta: Send + Sync + 'static;

    /// Metadata holding the TID word `word` (see [`crate::tid`]) for a new record or placeholder.
    fn new_meta(word: u64) -> Self::Meta;

    /// The TID word of a group's metadata, as last published.
    fn word(meta: &Self::Meta) -> u64;

    /// Copies group `g` of `rec` (its words `first..first + out.len()`) into `out` consistently and
    /// returns the TID word it observed. A group whose word is absent need not be copied.
    fn read_group(
        rec: RecordPtr<Self::Meta>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        out: &mut [u64],
    ) -> TxResult<u64>;

    /// Validates and installs the transaction's buffered writes, or returns the conflict that aborts it
    /// (leaving no lock held and nothing installed).
    fn commit(tx: &mut TxState<Self::Meta>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()>;

    /// Work after an attempt, while the worker runs no transaction: unlinking records it deleted or
    /// placeholders it left behind.
    fn reclaim(tx: &mut TxState<Self::Meta>, db: &Database<Self>);
}
