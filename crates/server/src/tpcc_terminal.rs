//! TPC-C's Order-Status, Delivery and Stock-Level (clauses 2.6-2.8) as stored procedures, beside
//! the NewOrder and Payment of the workloads crate's partitioned procedures: the same transaction
//! code `phasedb bench tpcc` runs, on the tables `tpcc.setup` created.
//!
//! - `tpcc.order_status(warehouse [, district, customer])`: the customer's balance and last order:
//!   `[c_id, c_balance (I64, cents), o_id, o_carrier_id, lines, amount (I64, cents)]`.
//! - `tpcc.delivery(warehouse [, carrier])`: delivers the oldest undelivered order of each district:
//!   the ten order ids delivered (0: the district had none).
//! - `tpcc.stock_level(warehouse [, district, threshold])`: `[distinct items of the district's last
//!   20 orders with stock below the threshold]`.
//!
//! Inputs left out are drawn as the specification's terminal draws them. Delivery runs as one
//! transaction over the ten districts (as `phasedb bench tpcc` runs it) and starts each district's
//! scan at a hint, the order after the last one delivered there: new orders only get higher ids.

use std::sync::atomic::{AtomicU32, Ordering};

use phasedb_proto::Value;
use phasedb_txn::{Procedures, Protocol, TxResult, Worker};
use phasedb_workloads::tpcc::customer::CustomerBy;
use phasedb_workloads::tpcc::schema::{CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER};
use phasedb_workloads::tpcc::{Scratch, TpccProcedures, delivery, order_status, stock_level};
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::interactive::TYPE_CALL;
use crate::procedures::{BadCall, u64_arg};

/// The names this module serves.
pub const NAMES: [&str; 3] = ["tpcc.order_status", "tpcc.delivery", "tpcc.stock_level"];

/// Per district of every warehouse, an order id no undelivered order is below: where Delivery
/// starts its scan.
pub struct DeliveryHints(Vec<AtomicU32>);

impl DeliveryHints {
    /// The hints of a freshly loaded (or recovered) TPC-C of `warehouses` warehouses: the load's
    /// first new order, a bound that stays true as orders are delivered.
    pub fn new(warehouses: u32) -> DeliveryHints {
        DeliveryHints(
            (0..warehouses * DISTRICTS)
                .map(|_| AtomicU32::new(FIRST_NEW_ORDER))
                .collect(),
        )
    }

    fn of(&self, w: u32, d: usize) -> &AtomicU32 {
        &self.0[(w - 1) as usize * DISTRICTS as usize + d]
    }
}

/// An engine thread's state for these procedures: its random numbers and scratch space.
pub struct TerminalState {
    rng: SmallRng,
    scratch: Scratch,
}

impl TerminalState {
    /// The state of engine thread `index`.
    pub fn new(index: usize) -> TerminalState {
        TerminalState {
            rng: SmallRng::seed_from_u64(0x7e4_11ea1 ^ index as u64),
            scratch: Scratch::new(),
        }
    }

    /// Scratch space for a transaction's lists (Payment's customers by last name too).
    pub fn scratch(&mut self) -> &mut Scratch {
        &mut self.scratch
    }
}

fn in_range(args: &[Value], i: usize, what: &str, lo: u64, hi: u64) -> Result<u32, BadCall> {
    let v = u64_arg(args, i, what)?;
    if v < lo || v > hi {
        return Err(format!("{what} {v} is not {lo}..={hi}"));
    }
    Ok(v as u32)
}

fn arity(name: &str, args: &[Value], counts: &[usize]) -> Result<(), BadCall> {
    if counts.contains(&args.len()) {
        Ok(())
    } else {
        Err(format!(
            "{name} takes {} arguments, not {}",
            counts
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
            args.len()
        ))
    }
}

/// Runs `name` (one of [`NAMES`]) with `args`.
pub fn call<P: Protocol>(
    name: &str,
    args: &[Value],
    procs: &TpccProcedures,
    hints: &DeliveryHints,
    state: &mut TerminalState,
    worker: &mut Worker<'_, P>,
) -> Result<TxResult<Vec<Value>>, BadCall> {
    let warehouses = procs.partitions();
    let w = in_range(args, 0, "warehouse", 1, warehouses as u64)?;
    let t = procs.tables();
    let TerminalState { rng, scratch } = state;
    match name {
        "tpcc.order_status" => {
            arity(name, args, &[1, 3])?;
            let mut input = order_status::Input::default();
            input.generate(rng, &procs.nurand_constants().1, w);
            if args.len() == 3 {
                input.d_id = in_range(args, 1, "district", 1, DISTRICTS as u64)?;
                input.customer =
                    CustomerBy::Id(in_range(args, 2, "customer", 1, CUSTOMERS as u64)?);
            }
            Ok(worker
                .execute(TYPE_CALL, |tx| order_status::run(tx, t, &input, scratch))
                .map(|o| {
                    vec![
                        Value::U64(o.c_id as u64),
                        Value::I64(o.c_balance),
                        Value::U64(o.o_id as u64),
                        Value::U64(o.o_carrier_id),
                        Value::U64(o.lines as u64),
                        Value::I64(o.amount),
                    ]
                }))
        }
        "tpcc.delivery" => {
            arity(name, args, &[1, 2])?;
            let mut input = delivery::Input::default();
            input.generate(rng, w);
            if args.len() == 2 {
                input.carrier_id = in_range(args, 1, "carrier", 1, 10)? as u64;
            }
            for (d, first) in input.first_o_id.iter_mut().enumerate() {
                *first = hints.of(w, d).load(Ordering::Relaxed);
            }
            Ok(worker
                .execute(TYPE_CALL, |tx| delivery::run(tx, t, &input))
                .map(|out| {
                    for (d, &o) in out.o_ids.iter().enumerate().filter(|(_, o)| **o != 0) {
                        hints.of(w, d).fetch_max(o + 1, Ordering::Relaxed);
                    }
                    out.o_ids.iter().map(|&o| Value::U64(o as u64)).collect()
                }))
        }
        "tpcc.stock_level" => {
            arity(name, args, &[1, 3])?;
            let mut input = stock_level::Input::default();
            input.generate(rng, w);
            if args.len() == 3 {
                input.d_id = in_range(args, 1, "district", 1, DISTRICTS as u64)?;
                input.threshold = u64_arg(args, 2, "threshold")?;
            }
            Ok(worker
                .execute(TYPE_CALL, |tx| stock_level::run(tx, t, &input, scratch))
                .map(|low| vec![Value::U64(low as u64)]))
        }
        _ => Err(format!("no procedure {name}")),
    }
}
