//! List-append, the workload Jepsen's Elle checks: each key's row holds a bounded list of integers,
//! and a transaction is a few micro-operations on a small, contended set of keys, `append(k, v)`
//! with a unique `v` (a read-modify-write of the list) and `read(k)`. While the database records
//! its history, the workload records what every transaction *observed*, the lists its reads
//! returned ([`ListAppendHistory`]), so a checker judges the values the data held rather than the
//! engine's own bookkeeping.
//!
//! **Rows.** Table `lists`: column `list` is a `Bounded(8 × capacity)` column holding the list as
//! consecutive little-endian `u64`s, oldest first (the length prefix gives the count). Table
//! `counters` holds one `I64` counter per slot (below) for the splittable variant; counters stay
//! with their slot, so a contended one stays contended long enough for Doppel to split it.
//!
//! **Keys.** The contended set is `keys` slots; slot `s` holds key `g × keys + s` of its current
//! generation `g`. A list holds at most `capacity` elements: the append that fills it moves its slot
//! on to the next generation, a fresh key that does not exist yet (its first append inserts it), as
//! Elle's generator retires keys after a bounded number of writes. An append that still finds a
//! list full (its transaction chose the key before the move) aborts by its own choice, and the
//! history marks that transaction `:fail`. Generation 0 is loaded with a one-element list, except
//! for the last `absent_keys` slots, which start absent; so inserts, misses and misses of loaded
//! rows are all exercised.
//!
//! **Micro-operations.** Each transaction touches `ops` distinct slots. An append reads the list
//! (recorded as a read) and writes it back with one more element; elements are unique across the
//! run (threads take them in blocks of [`BLOCK`] from a shared counter that starts above the loaded
//! ones, `1..=keys`). A read reads the list (and the counter, when `adds > 0`); a key that does not exist
//! reads as the empty list. With `adds > 0`, that share of micro-operations adds 1 to the slot's
//! counter with `Tx::add`, a splittable operation (Doppel splits contended counters and runs the
//! adds on per-core slices), and reads read the slot's counter too. Elle's list-append model has no
//! counters, so the EDN export leaves them out; the history's JSON keeps them, the engine's history
//! (split operations and merges included) holds them for every format, and the consistency check
//! compares the counters with the adds that committed.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use phasedb_check::OBSERVER_WORKER;
use phasedb_check::list_append::{ListAppendHistory, Mop, Outcome, Txn};
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Conflict, Database, Protocol, TableId, Tx, TxError, TxResult, Worker, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// List-append settings.
#[derive(Clone, Debug)]
pub struct AppendConfig {
    /// Slots of the contended key set.
    pub keys: u64,
    /// Micro-operations per transaction, on distinct slots.
    pub ops: usize,
    /// Share of micro-operations that read a list.
    pub read_ratio: f64,
    /// Share of micro-operations that add to a counter (the splittable variant); the rest append.
    pub adds: f64,
    /// Slots whose first key starts absent.
    pub absent_keys: u64,
    /// Elements a list holds before its slot moves to a fresh key.
    pub capacity: usize,
}

impl Default for AppendConfig {
    fn default() -> Self {
        AppendConfig {
            keys: 8,
            ops: 4,
            read_ratio: 0.5,
            adds: 0.0,
            absent_keys: 2,
            capacity: 16,
        }
    }
}

/// Most elements a list holds (its column is at most 65535 bytes).
pub const MAX_CAPACITY: usize = 8191;

impl AppendConfig {
    /// Checks the settings, naming the flag at fault.
    pub fn validate(&self) -> Result<(), String> {
        if self.keys == 0 || self.keys > 1 << 32 {
            return Err("--keys must be between 1 and 2^32".into());
        }
        if self.ops == 0 || self.ops as u64 > self.keys.min(64) {
            return Err("--ops must be between 1 and the smaller of --keys and 64".into());
        }
        for (name, v) in [("--read-ratio", self.read_ratio), ("--adds", self.adds)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        if self.read_ratio + self.adds > 1.0 {
            return Err("--read-ratio and --adds must add up to at most 1".into());
        }
        if self.absent_keys > self.keys {
            return Err("--absent-keys must be at most --keys".into());
        }
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(format!("--capacity must be between 1 and {MAX_CAPACITY}"));
        }
        Ok(())
    }
}

/// Elements a thread takes from the shared counter at a time.
pub const BLOCK: u64 = 4096;

const LIST: usize = 0;
const COUNT: usize = 0;

/// What one micro-operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Append,
    Add,
}

/// The list-append workload.
pub struct Append {
    cfg: AppendConfig,
    table: TableId,
    counters: TableId,
    /// Per slot, its current generation.
    generations: Vec<CachePadded<AtomicU64>>,
    /// Whether the database records its history (then so does the workload).
    record: bool,
    /// The first element of the next block.
    next_block: AtomicU64,
    /// Committed appends and adds, summed as threads finish.
    appended: AtomicU64,
    added: AtomicU64,
    /// The value-observed history of finished threads (while recording).
    observed: Mutex<ListAppendHistory>,
}

/// A thread's generator state and, while recording, its transactions.
pub struct AppendThread {
    rng: SmallRng,
    index: u64,
    /// The thread's next element, and the end of its block.
    next: u64,
    end: u64,
    appended: u64,
    added: u64,
    plan: Vec<(u64, Kind)>,
    list: Vec<u64>,
    /// A list's column image.
    bytes: Vec<u8>,
    /// The micro-operations of the current attempt.
    mops: Vec<Mop>,
    /// Slots (with their key) whose list the current attempt fills, or finds full.
    full: Vec<(u64, u64)>,
    log: Vec<Txn>,
}

impl Append {
    /// A list-append workload with settings `cfg` (validate them first).
    pub fn new(cfg: AppendConfig) -> Append {
        Append {
            generations: (0..cfg.keys).map(|_| Default::default()).collect(),
            next_block: AtomicU64::new(cfg.keys + 1),
            cfg,
            table: 0,
            counters: 0,
            record: false,
            appended: AtomicU64::new(0),
            added: AtomicU64::new(0),
            observed: Mutex::new(ListAppendHistory::default()),
        }
    }

    /// The key slot `slot` holds now.
    fn key(&self, slot: u64) -> u64 {
        self.generations[slot as usize].load(Ordering::Acquire) * self.cfg.keys + slot
    }

    /// Moves `slot` on from `key` to a fresh key (if no one did yet).
    fn retire(&self, slot: u64, key: u64) {
        let g = key / self.cfg.keys;
        let _ = self.generations[slot as usize].compare_exchange(
            g,
            g + 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    /// Every key used so far, in order.
    fn used_keys(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.cfg.keys).flat_map(move |s| {
            let g = self.generations[s as usize].load(Ordering::Acquire);
            (0..=g).map(move |g| g * self.cfg.keys + s)
        })
    }
}

/// Decodes a list column into `out`.
fn decode(bytes: &[u8], out: &mut Vec<u64>) {
    out.clear();
    out.extend(
        bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunks"))),
    );
}

/// Encodes `list` into `buf` (8 bytes per element, little-endian).
fn encode<'a>(list: &[u64], buf: &'a mut [u8]) -> &'a [u8] {
    for (c, v) in buf.chunks_exact_mut(8).zip(list) {
        c.copy_from_slice(&v.to_le_bytes());
    }
    &buf[..list.len() * 8]
}

impl AppendThread {
    /// Runs the planned micro-operations in one attempt, recording what it saw while the workload
    /// records (and allocating nothing otherwise).
    fn attempt<P: Protocol>(
        &mut self,
        w: &Append,
        tx: &mut Tx<'_, '_, P>,
        first: u64,
    ) -> TxResult<()> {
        let t = w.table;
        let record = w.record;
        self.mops.clear();
        self.full.clear();
        let mut next = first;
        for i in 0..self.plan.len() {
            let (slot, kind) = self.plan[i];
            if kind == Kind::Add {
                assert!(tx.add(w.counters, slot, COUNT, 1)?, "counters are loaded");
                if record {
                    self.mops.push(Mop::Add {
                        counter: slot,
                        delta: 1,
                    });
                }
                continue;
            }
            let key = w.key(slot);
            let present = match tx.get_columns(t, key, columns(&[LIST]))? {
                Some(row) => {
                    decode(row.bytes(LIST), &mut self.list);
                    true
                }
                None => {
                    self.list.clear();
                    false
                }
            };
            if record {
                self.mops.push(Mop::Read {
                    key,
                    list: Some(self.list.clone()),
                });
            }
            if kind == Kind::Read {
                if w.cfg.adds > 0.0 {
                    let count = tx
                        .get(w.counters, slot)?
                        .expect("counters are loaded")
                        .i64(COUNT);
                    if record {
                        self.mops.push(Mop::Count {
                            counter: slot,
                            value: Some(count),
                        });
                    }
                }
                continue;
            }
            let value = next;
            next += 1;
            if record {
                self.mops.push(Mop::Append { key, value });
            }
            if self.list.len() >= w.cfg.capacity {
                self.full.push((slot, key));
                return Err(tx.abort());
            }
            self.list.push(value);
            if self.list.len() == w.cfg.capacity {
                self.full.push((slot, key));
            }
            let image = encode(&self.list, &mut self.bytes);
            if present {
                tx.update(t, key, |r| r.set_bytes(LIST, image))?;
            } else {
                insert(tx, t, key, |r| r.set_bytes(LIST, image))?;
            }
        }
        Ok(())
    }
}

/// Inserts row `key` of a key this transaction saw absent; if another transaction inserted it
/// since, the view is stale: a conflict, so the transaction runs again.
fn insert<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: TableId,
    key: u64,
    fill: impl FnOnce(&mut phasedb_txn::RowWriter<'_>),
) -> TxResult<()> {
    match tx.insert(t, key, fill) {
        Err(TxError::DuplicateKey { .. }) => Err(TxError::Conflict(Conflict::InsertRace)),
        r => r,
    }
}

impl Workload for Append {
    type Thread = AppendThread;

    fn name(&self) -> &'static str {
        "append"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["txn"]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let schema = Schema::builder()
            .column(
                "list",
                ColumnType::Bounded((self.cfg.capacity * 8) as u16),
                0,
            )
            .build()
            .expect("the list schema is valid");
        let rows = (self.cfg.keys as usize).saturating_mul(4);
        self.table = db.create_table(TableSpec::new("lists", schema, rows));
        let schema = Schema::builder()
            .column("count", ColumnType::I64, 0)
            .build()
            .expect("the counter schema is valid");
        self.counters = db.create_table(TableSpec::new("counters", schema, rows));
        for slot in 0..self.cfg.keys {
            db.load(self.counters, slot, |_| {})
                .expect("slots are distinct");
        }
        self.record = db.config().record_history;
        let mut loaded = Vec::new();
        for slot in 0..self.cfg.keys - self.cfg.absent_keys {
            let element = slot + 1;
            db.load(self.table, slot, |r| {
                r.set_bytes(LIST, &element.to_le_bytes());
            })
            .expect("slots are distinct");
            loaded.push((slot, vec![element]));
        }
        if self.record {
            self.observed.lock().loaded = loaded;
        }
    }

    fn thread(&self, index: usize, seed: u64) -> AppendThread {
        AppendThread {
            rng: SmallRng::seed_from_u64(seed.wrapping_add(index as u64 * 7919)),
            index: index as u64,
            next: 0,
            end: 0,
            appended: 0,
            added: 0,
            plan: Vec::with_capacity(self.cfg.ops),
            list: Vec::with_capacity(self.cfg.capacity + 1),
            bytes: vec![0; self.cfg.capacity * 8],
            mops: Vec::with_capacity(2 * self.cfg.ops),
            full: Vec::new(),
            log: Vec::new(),
        }
    }

    fn rng<'a>(&self, thread: &'a mut AppendThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut AppendThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        th.plan.clear();
        while th.plan.len() < self.cfg.ops {
            let slot = th.rng.random_range(0..self.cfg.keys);
            if th.plan.iter().any(|&(s, _)| s == slot) {
                continue;
            }
            let x: f64 = th.rng.random();
            let kind = if x < self.cfg.read_ratio {
                Kind::Read
            } else if x < self.cfg.read_ratio + self.cfg.adds {
                Kind::Add
            } else {
                Kind::Append
            };
            th.plan.push((slot, kind));
        }
        let appends = th.plan.iter().filter(|p| p.1 == Kind::Append).count() as u64;
        if th.end - th.next < appends {
            th.next = self.next_block.fetch_add(BLOCK, Ordering::Relaxed);
            th.end = th.next + BLOCK;
        }
        let first = th.next;
        th.next += appends;
        let r = worker.execute(0, |tx| th.attempt(self, tx, first));
        if matches!(r, Err(TxError::Stashed)) {
            return r;
        }
        for &(slot, key) in &th.full {
            self.retire(slot, key);
        }
        let outcome = match &r {
            Ok(()) => {
                th.appended += appends;
                th.added += th.plan.iter().filter(|p| p.1 == Kind::Add).count() as u64;
                Outcome::Ok
            }
            Err(_) => Outcome::Fail,
        };
        if self.record {
            let mut mops = std::mem::take(&mut th.mops);
            if outcome == Outcome::Fail {
                for m in &mut mops {
                    match m {
                        Mop::Read { list, .. } => *list = None,
                        Mop::Count { value, .. } => *value = None,
                        _ => {}
                    }
                }
            }
            th.log.push(Txn {
                process: th.index as u32,
                outcome,
                mops,
            });
        }
        match r {
            Err(TxError::UserAbort) => Ok(()),
            r => r,
        }
    }

    fn finish(&self, th: AppendThread) {
        self.appended.fetch_add(th.appended, Ordering::Relaxed);
        self.added.fetch_add(th.added, Ordering::Relaxed);
        if self.record {
            self.observed.lock().txns.extend(th.log);
        }
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let (t, c) = (self.table, self.counters);
        let keys: Vec<u64> = self.used_keys().collect();
        // One last transaction reads every list and counter, so every committed append is observed.
        let mut lists = Vec::with_capacity(keys.len());
        let mut counts = Vec::with_capacity(self.cfg.keys as usize);
        db.execute(|tx| {
            lists.clear();
            counts.clear();
            for &key in &keys {
                let mut list = Vec::new();
                if let Some(row) = tx.get(t, key)? {
                    decode(row.bytes(LIST), &mut list);
                }
                lists.push((key, list));
            }
            for slot in 0..self.cfg.keys {
                let row = tx.get(c, slot)?.expect("counters are loaded");
                counts.push(row.i64(COUNT));
            }
            Ok(())
        })
        .map_err(|e| format!("the final read failed: {e}"))?;
        let loaded = (self.cfg.keys - self.cfg.absent_keys) as i64;
        let elements = lists.iter().map(|l| l.1.len() as i64).sum::<i64>() - loaded;
        let counted: i64 = counts.iter().sum();
        let mut problems = Vec::new();
        let appended = self.appended.load(Ordering::Relaxed);
        if elements != appended as i64 {
            problems.push(format!(
                "the lists hold {elements} appended elements, but {appended} appends committed"
            ));
        }
        let added = self.added.load(Ordering::Relaxed);
        if counted != added as i64 {
            problems.push(format!(
                "the counters sum to {counted}, but {added} adds committed"
            ));
        }
        if self.record {
            let reads = lists.into_iter().map(|(key, list)| Mop::Read {
                key,
                list: Some(list),
            });
            let counters = counts
                .into_iter()
                .enumerate()
                .filter(|_| self.cfg.adds > 0.0)
                .map(|(slot, value)| Mop::Count {
                    counter: slot as u64,
                    value: Some(value),
                });
            self.observed.lock().txns.push(Txn {
                process: OBSERVER_WORKER,
                outcome: Outcome::Ok,
                mops: reads.chain(counters).collect(),
            });
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn take_observed(&self) -> Option<ListAppendHistory> {
        self.record
            .then(|| std::mem::take(&mut *self.observed.lock()))
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("keys", self.cfg.keys.to_string()),
            ("ops", self.cfg.ops.to_string()),
            ("read_ratio", self.cfg.read_ratio.to_string()),
            ("adds", self.cfg.adds.to_string()),
            ("absent_keys", self.cfg.absent_keys.to_string()),
            ("capacity", self.cfg.capacity.to_string()),
        ]
    }
}
