use phasedb_storage::{InsertOutcome, RecordLayout, RecordPtr, TableId};

use crate::commit::placeholder_word;
use crate::database::Database;
use crate::error::TxResult;
use crate::protocol::Protocol;
use crate::state::{CommitCtx, LockEntry, TxState, WriteKind};
use crate::tid::{ABSENT, TID_MASK, TidWord};

/// No concurrency control: reads copy whatever is there, commit writes in place. It is the upper bound
/// on throughput for measuring a protocol's overhead, and it is not serializable under contention.
/// Each write still publishes a version id unique per worker, so its histories can be checked.
pub struct NoCc;

impl Protocol for NoCc {
    const NAME: &'static str = "nocc";
    const PARTIAL_READS: bool = true;
    type Shared = ();
    type Meta = TidWord;

    fn new_meta(word: u64) -> TidWord {
        TidWord::new(word)
    }

    #[allow(clippy::too_many_arguments)] // the hot read path; kept flat so it inlines
    #[inline]
    fn read_group(
        st: &mut TxState<TidWord>,
        _db: &Database<Self>,
        _table: TableId,
        rec: RecordPtr<TidWord>,
        layout: &RecordLayout,
        g: usize,
        first: usize,
        words: usize,
    ) -> TxResult<u64> {
        let word = rec.meta(layout, g).load();
        if word & ABSENT == 0 {
            rec.copy_part(layout, g, first, &mut st.row[first..first + words]);
        }
        Ok(word & (TID_MASK | ABSENT))
    }

    fn commit(st: &mut TxState<TidWord>, ctx: &mut CommitCtx<'_, Self>) -> TxResult<()> {
        let db = ctx.db;
        if st.writes.iter().all(|w| w.kind == WriteKind::Cancelled) {
            return Ok(());
        }
        let version = (((*ctx.last_tid >> 10) + 1) << 10) | (ctx.worker as u64 & 0x3ff);
        if !st.deferred_ops.is_empty() {
            crate::commute::resolve_at_install(st, db);
        }
        for w in 0..st.writes.len() {
            let entry = &st.writes[w];
            let table = db.table(entry.table);
            let layout = table.layout();
            let rec = match entry.kind {
                WriteKind::Cancelled => continue,
                WriteKind::Insert => {
                    let (t, key) = (entry.table, entry.key);
                    match table.insert_with(
                        key,
                        ctx.guard,
                        |_| TidWord::new(placeholder_word(db, t, key)),
                        None,
                    ) {
                        InsertOutcome::Inserted(r) | InsertOutcome::Exists(r) => r,
                    }
                }
                WriteKind::Update | WriteKind::Delete => {
                    entry.rec.expect("updates and deletes know their record")
                }
            };
            st.writes[w].rec = Some(rec);
            let entry = &st.writes[w];
            let groups = entry.groups(table.schema());
            if entry.kind != WriteKind::Delete {
                let n = table.schema().row_words();
                rec.install_columns(
                    layout,
                    table.schema(),
                    entry.columns,
                    &st.images[entry.image..entry.image + n],
                );
            }
            let word = if entry.kind == WriteKind::Delete {
                version | ABSENT
            } else {
                version
            };
            let mut m = groups;
            while m != 0 {
                let g = m.trailing_zeros() as usize;
                m &= m - 1;
                let meta = rec.meta(layout, g);
                let prev = meta.load();
                meta.store(word);
                st.locks.push(LockEntry {
                    rec,
                    group: g as u8,
                    write: w as u32,
                    prev,
                    fresh: false,
                    held: false,
                    shared: false,
                });
            }
        }
        *ctx.last_tid = version;
        ctx.tid = version;
        Ok(())
    }

    fn reclaim(_st: &mut TxState<TidWord>, _db: &Database<Self>) {}
}
