//! TPC-C's NewOrder and Payment as a partitioned deployment runs them (STAR §8.1.1: every table
//! partitioned by warehouse, NewOrder and Payment only).
//!
//! Partition `p` is warehouse `p + 1` (TPC-C numbers warehouses from 1). Every table but ITEM belongs
//! to the warehouse its key starts with (WAREHOUSE's key is the warehouse id; a history row's key
//! starts with the warehouse paid to, [`history_key`]); ITEM is read-only and loaded on every node.
//! A request is the terminal input of [`new_order`] or [`payment`], drawn and run by the same code as
//! [`super::Tpcc`]'s. A cross-partition NewOrder has one line supplied by another warehouse; a
//! cross-partition Payment pays for a customer of another warehouse (clause 2.5.1.2).

use std::cell::RefCell;

use phasedb_txn::{
    Database, PartitionId, Procedures, Protocol, TableId, Touched, TxResult, Worker,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::random::NuRandC;
use super::schema::{MAX_HISTORY_ORIGIN, Tables, history_key, warehouse_of_key};
use super::{
    NEW_ORDER, PAYMENT, Scratch, TXN_TYPES, check, load, new_order, nurand_constants,
    other_warehouse, payment,
};

/// Which transactions a partitioned TPC-C runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProceduresMix {
    /// NewOrder only.
    NewOrder,
    /// Payment only.
    Payment,
    /// 50% NewOrder, 50% Payment (STAR's TPC-C).
    NewOrderPayment,
}

impl ProceduresMix {
    /// Parses the name: "new-order", "payment" or "no-p".
    pub fn parse(s: &str) -> Option<ProceduresMix> {
        match s {
            "new-order" => Some(ProceduresMix::NewOrder),
            "payment" => Some(ProceduresMix::Payment),
            "no-p" => Some(ProceduresMix::NewOrderPayment),
            _ => None,
        }
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            ProceduresMix::NewOrder => "new-order",
            ProceduresMix::Payment => "payment",
            ProceduresMix::NewOrderPayment => "no-p",
        }
    }
}

/// Settings of partitioned TPC-C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpccProceduresConfig {
    /// Number of warehouses, which is the number of partitions.
    pub warehouses: u32,
    /// Transaction mix.
    pub mix: ProceduresMix,
    /// Fine-grained column groups (see [`super::schema`]).
    pub fine: bool,
}

impl Default for TpccProceduresConfig {
    fn default() -> Self {
        TpccProceduresConfig {
            warehouses: 1,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        }
    }
}

impl TpccProceduresConfig {
    /// Checks the settings, with a message fit for a user.
    pub fn validate(&self) -> Result<(), String> {
        super::TpccConfig {
            warehouses: self.warehouses,
            ..Default::default()
        }
        .validate()
    }
}

/// One request: the terminal input of a NewOrder or a Payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TpccRequest {
    NewOrder(new_order::Input),
    Payment(payment::Input),
}

/// A generator's state: its random numbers, and the numbering of the history rows its Payments
/// insert.
pub struct TpccGen {
    rng: SmallRng,
    history_origin: u32,
    history_seq: u32,
}

thread_local! {
    /// Payment's scratch space, one per thread, since [`Procedures::run`] has no per-thread state:
    /// running a Payment allocates nothing once its thread has run one.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Partitioned TPC-C's stored procedures.
pub struct TpccProcedures {
    cfg: TpccProceduresConfig,
    tables: Tables,
    /// NURand constants of the load.
    c_load: NuRandC,
    /// NURand constants of the run.
    c_run: NuRandC,
}

impl TpccProcedures {
    /// The workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: TpccProceduresConfig) -> TpccProcedures {
        let (c_load, c_run) = nurand_constants(cfg.warehouses);
        TpccProcedures {
            cfg,
            tables: Tables::default(),
            c_load,
            c_run,
        }
    }

    /// The settings.
    pub fn config(&self) -> &TpccProceduresConfig {
        &self.cfg
    }

    /// TPC-C's consistency conditions on the held warehouses when Delivery may have run beside
    /// this mix (as `phasedb serve`'s `tpcc.delivery`): condition 11 counts the deliveries made
    /// since the load (C_DELIVERY_CNT), which is the condition as written until the first one.
    pub fn check_with_delivery<P: Protocol>(
        &self,
        db: &Database<P>,
        held: &[PartitionId],
    ) -> Result<(), String> {
        let held = |w: u32| held.contains(&Self::partition(w));
        check::check(db, &self.tables, self.cfg.warehouses, true, held)
    }

    /// The ids of the tables (valid after `create_tables`).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The NURand constants of the load and of the run (the run's draw the inputs of the
    /// transactions run beside NewOrder and Payment, such as `phasedb serve`'s Order-Status).
    pub fn nurand_constants(&self) -> (NuRandC, NuRandC) {
        (self.c_load, self.c_run)
    }

    /// The warehouse of partition `p`: `p + 1`.
    pub fn warehouse(p: PartitionId) -> u32 {
        p + 1
    }

    /// The partition of warehouse `w` (1-based): `w - 1`.
    pub fn partition(w: u32) -> PartitionId {
        w.wrapping_sub(1)
    }
}

impl Procedures for TpccProcedures {
    type Request = TpccRequest;
    type Gen = TpccGen;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn partitions(&self) -> u32 {
        self.cfg.warehouses
    }

    /// "new-order" and "payment", at the indexes [`NEW_ORDER`] and [`PAYMENT`] as in [`TXN_TYPES`].
    fn txn_types(&self) -> Vec<&'static str> {
        TXN_TYPES[..=PAYMENT].to_vec()
    }

    fn create_tables<P: Protocol>(&mut self, db: &mut Database<P>) {
        self.tables = Tables::create(db, self.cfg.warehouses, self.cfg.fine);
    }

    /// Loads warehouse `p + 1`: its stock, districts, customers, history and orders.
    fn load_partition<P: Protocol>(&self, db: &Database<P>, p: PartitionId) {
        let (w, date) = (Self::warehouse(p), load::FIXED_LOAD_DATE);
        load::load_warehouse(db, &self.tables, w, self.c_load, date);
    }

    /// Loads the items.
    fn load_shared<P: Protocol>(&self, db: &Database<P>) {
        load::load_items(db, &self.tables);
    }

    fn partition_of(&self, table: TableId, key: u64) -> Option<PartitionId> {
        if table == self.tables.item {
            None
        } else if table == self.tables.warehouse {
            Some(Self::partition(key as u32))
        } else {
            Some(Self::partition(warehouse_of_key(key)))
        }
    }

    /// Generator `index` numbers the history rows its Payments insert with `index + 1`, so the
    /// generators of one deployment need distinct indexes, below 65,535 (a Payment whose history key
    /// another generator used fails with a duplicate key).
    fn generator(&self, index: usize, seed: u64) -> TpccGen {
        let history_origin = u32::try_from(index + 1)
            .ok()
            .filter(|&o| o <= MAX_HISTORY_ORIGIN)
            .unwrap_or_else(|| panic!("TPC-C generator index {index} is past 65,534"));
        TpccGen {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            history_origin,
            history_seq: 0,
        }
    }

    fn generate(&self, g: &mut TpccGen, home: PartitionId, cross: f64) -> TpccRequest {
        let (w, warehouses) = (Self::warehouse(home), self.cfg.warehouses);
        let new_order = match self.cfg.mix {
            ProceduresMix::NewOrder => true,
            ProceduresMix::Payment => false,
            ProceduresMix::NewOrderPayment => g.rng.random_bool(0.5),
        };
        let remote = (warehouses > 1 && g.rng.random::<f64>() < cross)
            .then(|| other_warehouse(&mut g.rng, w, warehouses));
        if new_order {
            let mut input = new_order::Input::default();
            input.generate_partitioned(&mut g.rng, &self.c_run, w, remote);
            TpccRequest::NewOrder(input)
        } else {
            g.history_seq = g.history_seq.wrapping_add(1);
            let key = history_key(w, g.history_origin, g.history_seq);
            let mut input = payment::Input::default();
            input.generate_partitioned(&mut g.rng, &self.c_run, w, remote, key);
            TpccRequest::Payment(input)
        }
    }

    fn touched(&self, req: &TpccRequest) -> Touched {
        match req {
            TpccRequest::NewOrder(input) => {
                let mut t = Touched::home(Self::partition(input.w_id));
                for line in input.lines.iter().take(input.ol_cnt) {
                    t.add(Self::partition(line.supply_w_id));
                }
                t
            }
            TpccRequest::Payment(input) => {
                let mut t = Touched::home(Self::partition(input.w_id));
                t.add(Self::partition(input.c_w_id));
                t
            }
        }
    }

    fn txn_type(&self, req: &TpccRequest) -> usize {
        match req {
            TpccRequest::NewOrder(_) => NEW_ORDER,
            TpccRequest::Payment(_) => PAYMENT,
        }
    }

    /// Runs the NewOrder or Payment; a NewOrder of an unused item (1%) returns
    /// [`phasedb_txn::TxError::UserAbort`], the rollback TPC-C asks for.
    fn run<P: Protocol>(&self, req: &TpccRequest, worker: &mut Worker<'_, P>) -> TxResult<()> {
        let t = &self.tables;
        match req {
            TpccRequest::NewOrder(input) => worker
                .execute(NEW_ORDER, |tx| new_order::run(tx, t, input))
                .map(drop),
            TpccRequest::Payment(input) => SCRATCH.with_borrow_mut(|scratch| {
                worker
                    .execute(PAYMENT, |tx| payment::run(tx, t, input, scratch))
                    .map(drop)
            }),
        }
    }

    /// TPC-C's consistency conditions on the held warehouses (condition 10 only when every
    /// warehouse is held: the history rows of a remote customer's payments are held with the warehouse
    /// paid to).
    fn check<P: Protocol>(&self, db: &Database<P>, held: &[PartitionId]) -> Result<(), String> {
        let held = |w: u32| held.contains(&Self::partition(w));
        check::check(db, &self.tables, self.cfg.warehouses, false, held)
    }
}
