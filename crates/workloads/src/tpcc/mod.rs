//! TPC-C (revision 5.11): the nine tables loaded per clause 4.3.3, the five transactions of clauses
//! 2.4-2.8 as stored procedures over the `Tx` API, and the consistency conditions of clause 3.3.2.
//!
//! Each worker thread emulates the terminals of one home warehouse (thread `i` serves warehouse
//! `i % warehouses + 1`, as DBx1000 and Silo do) and runs transactions back to back with no keying or
//! think time. Delivery runs as one transaction over the ten districts rather than deferred.
//! Coarse mode versions each row as a whole; fine mode splits rows into column groups so that fields
//! read and fields updated by different transactions do not falsely conflict (see [`schema`]).
//!
//! [`TpccProcedures`] runs NewOrder and Payment for partitioned deployments (a partition per
//! warehouse), with the same generation and procedures.

mod check;
mod config;
pub mod customer;
pub mod delivery;
mod load;
mod locks;
pub mod new_order;
pub mod order_status;
pub mod payment;
mod procedures;
pub mod random;
pub mod schema;
pub mod stock_level;

use std::sync::atomic::{AtomicU32, Ordering};

use phasedb_txn::{Database, Protocol, TxError, TxResult, Worker};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;
pub use config::{TpccConfig, TpccMix};
pub use procedures::{ProceduresMix, TpccGen, TpccProcedures, TpccProceduresConfig, TpccRequest};
use random::NuRandC;
use schema::Tables;

/// Index of NewOrder in the statistics.
pub const NEW_ORDER: usize = 0;
/// Index of Payment in the statistics.
pub const PAYMENT: usize = 1;
/// Index of OrderStatus in the statistics.
pub const ORDER_STATUS: usize = 2;
/// Index of Delivery in the statistics.
pub const DELIVERY: usize = 3;
/// Index of StockLevel in the statistics.
pub const STOCK_LEVEL: usize = 4;
/// Names of the transaction types, indexed like the statistics.
pub const TXN_TYPES: [&str; 5] = [
    "new-order",
    "payment",
    "order-status",
    "delivery",
    "stock-level",
];

/// The TPC-C workload.
pub struct Tpcc {
    cfg: TpccConfig,
    tables: Tables,
    /// NURand constants of the load.
    c_load: NuRandC,
    /// NURand constants of the run (`C_LAST`'s obeys the delta rule against the load's).
    c_run: NuRandC,
    /// Threads created so far; numbers the history rows each inserts.
    threads: AtomicU32,
    /// Per district, an order id below which no new-order row exists (the order after the last one
    /// delivered): where Delivery starts looking.
    first_new_order: Vec<AtomicU32>,
    /// Every table's column groups are chosen by the engine ([`Tpcc::auto_groups`]).
    auto: bool,
}

/// A thread's generator state: its random numbers, home warehouse, the inputs of the transaction
/// being run and reusable buffers, so that running a transaction allocates nothing.
pub struct TpccThread {
    rng: SmallRng,
    home: u32,
    history_origin: u32,
    history_seq: u32,
    new_order: new_order::Input,
    payment: payment::Input,
    order_status: order_status::Input,
    delivery: delivery::Input,
    stock_level: stock_level::Input,
    scratch: Scratch,
    probe: fn(bool),
}

impl TpccThread {
    /// Sets a function called with `true` when the workload's own code starts (generating a
    /// transaction's input, or each run of its procedure body, `Tx` calls included) and with `false`
    /// when it ends, so the engine's commit is left out; for instrumentation such as counting
    /// allocations.
    pub fn set_probe(&mut self, probe: fn(bool)) {
        self.probe = probe;
    }

    /// The home warehouse of the thread.
    pub fn home(&self) -> u32 {
        self.home
    }
}

/// Scratch space of the procedures, reused across transactions so they allocate nothing.
pub struct Scratch {
    /// Customers matching a last name: (C_FIRST, C_ID).
    matches: Vec<([u8; 16], u32)>,
    /// Item ids seen by StockLevel.
    items: Vec<u32>,
    /// A new `C_DATA` being built by Payment.
    data: [u8; 500],
}

impl Scratch {
    /// Scratch space sized for every transaction.
    pub fn new() -> Scratch {
        Scratch {
            matches: Vec::with_capacity(256),
            items: Vec::with_capacity(20 * schema::MAX_OL_CNT),
            data: [0; 500],
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Tpcc {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: TpccConfig) -> Tpcc {
        let (c_load, c_run) = nurand_constants(cfg.warehouses);
        Tpcc {
            cfg,
            tables: Tables::default(),
            c_load,
            c_run,
            threads: AtomicU32::new(0),
            first_new_order: Vec::new(),
            auto: false,
        }
    }

    /// Declares every table's column groups automatic (`--granularity auto`): they start as
    /// configured (coarse unless `fine`) and the engine changes them while it runs.
    pub fn auto_groups(mut self) -> Tpcc {
        self.auto = true;
        self
    }

    /// The settings.
    pub fn config(&self) -> &TpccConfig {
        &self.cfg
    }

    /// The ids of the tables (valid after `setup`).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The NURand constants of the load and of the run.
    pub fn nurand_constants(&self) -> (NuRandC, NuRandC) {
        (self.c_load, self.c_run)
    }

    /// The Delivery hint of district `d + 1` of warehouse `w`.
    fn first_new_order(&self, w: u32, d: usize) -> &AtomicU32 {
        &self.first_new_order[(w - 1) as usize * schema::DISTRICTS as usize + d]
    }

    fn pick(&self, rng: &mut SmallRng) -> usize {
        let weights = self.cfg.mix.weights();
        let mut r = rng.random_range(0..weights.iter().sum::<u32>());
        for (ty, w) in weights.into_iter().enumerate() {
            if r < w {
                return ty;
            }
            r -= w;
        }
        unreachable!("r is below the sum of the weights")
    }
}

/// The NURand constants of the load and of the run for `warehouses` warehouses: fixed by the scale,
/// so every node of a partitioned deployment loads and generates alike.
fn nurand_constants(warehouses: u32) -> (NuRandC, NuRandC) {
    let mut rng = SmallRng::seed_from_u64(0xc0ff_ee00 ^ warehouses as u64);
    let c_load = NuRandC::random(&mut rng);
    let c_run = c_load.for_run(&mut rng);
    (c_load, c_run)
}

/// Deserializes a count and refuses one above `N` (the length of the array it counts into).
fn serde_at_most<'de, D: serde::Deserializer<'de>, const N: usize>(
    d: D,
) -> Result<usize, D::Error> {
    let n = <usize as serde::Deserialize>::deserialize(d)?;
    if n > N {
        return Err(serde::de::Error::custom(format_args!(
            "count {n} is above the most, {N}"
        )));
    }
    Ok(n)
}

/// Runs `f` between `probe(true)` and `probe(false)`.
#[inline]
fn probed<R>(probe: fn(bool), f: impl FnOnce() -> R) -> R {
    probe(true);
    let r = f();
    probe(false);
    r
}

/// The default probe, which does nothing.
fn no_probe(_: bool) {}

/// A warehouse other than `home`, uniformly (`home` itself if it is the only one).
fn other_warehouse(rng: &mut SmallRng, home: u32, warehouses: u32) -> u32 {
    if warehouses == 1 {
        return home;
    }
    let w = rng.random_range(1..warehouses);
    if w >= home { w + 1 } else { w }
}

/// The error for a row the population guarantees but a read did not find.
fn missing(what: &'static str) -> TxError {
    TxError::Invalid(what)
}

impl Workload for Tpcc {
    type Thread = TpccThread;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        TXN_TYPES.to_vec()
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        self.tables = Tables::create(db, self.cfg.warehouses, self.cfg.fine);
        let districts = (self.cfg.warehouses * schema::DISTRICTS) as usize;
        self.first_new_order = (0..districts)
            .map(|_| AtomicU32::new(schema::FIRST_NEW_ORDER))
            .collect();
        load::load(db, &self.tables, self.cfg.warehouses, self.c_load);
        if self.auto {
            for t in 0..db.tables().len() as phasedb_txn::TableId {
                db.set_auto_groups(t)
                    .unwrap_or_else(|e| panic!("--granularity auto: {e}"));
            }
        }
    }

    /// History rows are keyed by their inserting thread's number: new threads number on from the
    /// highest number a recovered row carries.
    fn recovered<P: Protocol>(&mut self, db: &Database<P>) -> Result<(), String> {
        let mut highest = 0;
        db.for_each_row_quiescent(self.tables.history, |key, _| {
            highest = highest.max(schema::history_origin_of(key));
        });
        if highest >= schema::MAX_HISTORY_ORIGIN - phasedb_txn::MAX_WORKERS as u32 {
            return Err("the recovered history table has used up its thread numbers".into());
        }
        self.threads.store(highest, Ordering::Relaxed);
        Ok(())
    }

    fn rng<'a>(&self, thread: &'a mut TpccThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn thread(&self, index: usize, seed: u64) -> TpccThread {
        let origin = self.threads.fetch_add(1, Ordering::Relaxed) + 1;
        debug_assert!(origin <= schema::MAX_HISTORY_ORIGIN);
        TpccThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            home: (index % self.cfg.warehouses as usize) as u32 + 1,
            history_origin: origin,
            history_seq: 0,
            new_order: Default::default(),
            payment: Default::default(),
            order_status: Default::default(),
            delivery: Default::default(),
            stock_level: Default::default(),
            scratch: Scratch::new(),
            probe: no_probe,
        }
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut TpccThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let (cfg, t, c) = (&self.cfg, &self.tables, &self.c_run);
        let probe = th.probe;
        probe(true);
        let ty = self.pick(&mut th.rng);
        match ty {
            NEW_ORDER => th.new_order.generate(&mut th.rng, cfg, c, th.home),
            PAYMENT => {
                th.history_seq = th.history_seq.wrapping_add(1);
                let key = schema::history_key(th.home, th.history_origin, th.history_seq);
                th.payment.generate(&mut th.rng, cfg, c, th.home, key);
            }
            ORDER_STATUS => th.order_status.generate(&mut th.rng, c, th.home),
            DELIVERY => {
                th.delivery.generate(&mut th.rng, th.home);
                for (d, first) in th.delivery.first_o_id.iter_mut().enumerate() {
                    *first = self.first_new_order(th.home, d).load(Ordering::Relaxed);
                }
            }
            _ => th.stock_level.generate(&mut th.rng, th.home),
        }
        probe(false);
        let scratch = &mut th.scratch;
        let r = match ty {
            NEW_ORDER => worker
                .execute(ty, |tx| {
                    probed(probe, || new_order::run(tx, t, &th.new_order))
                })
                .map(drop),
            PAYMENT => worker
                .execute(ty, |tx| {
                    probed(probe, || payment::run(tx, t, &th.payment, scratch))
                })
                .map(drop),
            ORDER_STATUS => worker
                .execute(ty, |tx| {
                    probed(probe, || {
                        order_status::run(tx, t, &th.order_status, scratch)
                    })
                })
                .map(drop),
            DELIVERY => worker
                .execute(ty, |tx| {
                    probed(probe, || delivery::run(tx, t, &th.delivery))
                })
                .map(|out| {
                    for (d, &o) in out.o_ids.iter().enumerate().filter(|(_, o)| **o != 0) {
                        self.first_new_order(th.home, d)
                            .fetch_max(o + 1, Ordering::Relaxed);
                    }
                }),
            _ => worker
                .execute(ty, |tx| {
                    probed(probe, || stock_level::run(tx, t, &th.stock_level, scratch))
                })
                .map(drop),
        };
        match r {
            // NewOrder's invalid item: a rollback the specification asks for, counted as a user abort.
            Err(TxError::UserAbort) => Ok(()),
            r => r,
        }
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let delivery_in_mix = self.cfg.mix.weights()[DELIVERY] > 0;
        check::check(
            db,
            &self.tables,
            self.cfg.warehouses,
            delivery_in_mix,
            |_| true,
        )
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let c = &self.cfg;
        vec![
            ("warehouses", c.warehouses.to_string()),
            ("mix", c.mix.name().into()),
            ("remote_item_ratio", c.remote_item_ratio.to_string()),
            ("remote_payment_ratio", c.remote_payment_ratio.to_string()),
            ("granularity", granularity(self.auto, c.fine).into()),
            ("c_last_load", self.c_load.c_last.to_string()),
            ("c_last_run", self.c_run.c_last.to_string()),
        ]
    }
}

/// The `granularity` setting of a run.
pub(crate) fn granularity(auto: bool, fine: bool) -> &'static str {
    match (auto, fine) {
        (true, _) => "auto",
        (false, true) => "fine",
        (false, false) => "coarse",
    }
}
