//! Stored procedures invocable by name: the workloads crate's YCSB and TPC-C procedures (the
//! same code the embedded benchmark and STAR's nodes run).
//!
//! - `ycsb.setup(rows, columns, column_size)`: creates and loads `usertable`; returns its id.
//! - `ycsb(key0, write0, key1, write1, key2, write2, key3, write3, value)`: STAR's YCSB
//!   transaction: four rows read, those with `write` 1 rewritten with bytes chosen by `value`.
//! - `tpcc.setup(warehouses)`: creates and loads TPC-C's nine tables; returns the first id.
//! - `tpcc.new_order(warehouse)`, `tpcc.payment(warehouse)`: one NewOrder or Payment with a home
//!   warehouse, its other inputs drawn by the server as the specification's terminal does;
//!   answers `[district, o_id]` or `[history row key]`, so a client can find what it made.
//! - `tpcc.order_status`, `tpcc.delivery`, `tpcc.stock_level`: see [`crate::tpcc_terminal`].
//! - `tpcc.check()`: TPC-C's consistency conditions, with the engine paused ([`check`]).

use phasedb_proto::Value;
use phasedb_txn::{Database, Procedures, Protocol, TxResult, Worker};
use phasedb_workloads::tpcc::{
    NEW_ORDER, PAYMENT, ProceduresMix, TpccGen, TpccProcedures, TpccProceduresConfig, TpccRequest,
    new_order, payment,
};
use phasedb_workloads::ycsb::{YcsbOp, YcsbProcedures, YcsbProceduresConfig, YcsbRequest};

use crate::catalog::{Catalog, def_of};
use crate::tpcc_terminal::{self, DeliveryHints, TerminalState};

/// The procedures set up so far.
#[derive(Default)]
pub struct Installed {
    pub ycsb: Option<YcsbProcedures>,
    pub tpcc: Option<TpccProcedures>,
    /// Delivery's hints, with `tpcc`.
    pub tpcc_hints: Option<DeliveryHints>,
    /// Added to an engine thread's index to number the history rows its Payments insert: past
    /// the numbers of the rows a data directory recovered.
    pub tpcc_origin_base: usize,
}

/// A bad call: unknown name or arguments that do not fit.
pub type BadCall = String;

pub(crate) fn u64_arg(args: &[Value], i: usize, what: &str) -> Result<u64, BadCall> {
    match args.get(i) {
        Some(Value::U64(v)) => Ok(*v),
        Some(Value::I64(v)) if *v >= 0 => Ok(*v as u64),
        _ => Err(format!("argument {i} ({what}) must be an unsigned integer")),
    }
}

/// Whether `name` is a setup procedure (it creates tables, so it runs with the engine paused).
pub fn is_setup(name: &str) -> bool {
    matches!(name, "ycsb.setup" | "tpcc.setup")
}

/// Whether `name` is a procedure that reads the whole database quiescent (it runs with the
/// engine paused, like a setup, but changes nothing).
pub fn is_check(name: &str) -> bool {
    name == "tpcc.check"
}

/// `tpcc.check`: TPC-C's consistency conditions (clause 3.3.2, as the workloads crate checks
/// them after a benchmark whose mix has Delivery: condition 11 counts the deliveries made since
/// the load, so it holds through `tpcc.delivery` too, and is the condition as written until the
/// first one) on the database as it is. Call it with no transaction running (the engine paused).
/// Answers `[]` when they hold, else `[the first violation]` as bytes.
pub fn check<P: Protocol>(
    args: &[Value],
    db: &Database<P>,
    installed: &Installed,
) -> Result<Vec<Value>, BadCall> {
    let procs = installed.tpcc.as_ref().ok_or("call tpcc.setup first")?;
    if !args.is_empty() {
        return Err("tpcc.check takes no arguments".into());
    }
    let every: Vec<_> = (0..procs.partitions()).collect();
    Ok(match procs.check_with_delivery(db, &every) {
        Ok(()) => vec![],
        Err(violation) => vec![Value::Bytes(violation.into_bytes())],
    })
}

/// Runs a setup procedure with exclusive access to the database: creates its tables and, with
/// `load`, loads them (a data directory's replay creates them only: their rows are recovered).
pub fn setup<P: Protocol>(
    name: &str,
    args: &[Value],
    db: &mut Database<P>,
    catalog: &mut Catalog,
    installed: &mut Installed,
    load: bool,
) -> Result<Vec<Value>, BadCall> {
    let first = db.tables().len() as u32;
    match name {
        "ycsb.setup" => {
            if installed.ycsb.is_some() {
                return Err("ycsb is set up already".into());
            }
            let mut cfg = YcsbProceduresConfig::star(1);
            cfg.rows_per_partition = u64_arg(args, 0, "rows")?;
            cfg.columns = u64_arg(args, 1, "columns")? as usize;
            cfg.column_size = u64_arg(args, 2, "column_size")? as usize;
            cfg.validate()?;
            if cfg.rows_per_partition > crate::catalog::MAX_CAPACITY {
                return Err("too many rows".into());
            }
            if catalog.find("usertable").is_some() {
                return Err("table usertable exists".into());
            }
            let mut procs = YcsbProcedures::new(cfg);
            procs.create_tables(db);
            if load {
                procs.load_partition(db, 0);
            }
            installed.ycsb = Some(procs);
        }
        "tpcc.setup" => {
            if installed.tpcc.is_some() {
                return Err("tpcc is set up already".into());
            }
            let cfg = TpccProceduresConfig {
                warehouses: u64_arg(args, 0, "warehouses")?.min(10_000) as u32,
                mix: ProceduresMix::NewOrderPayment,
                ..Default::default()
            };
            cfg.validate()?;
            let mut procs = TpccProcedures::new(cfg);
            // Learn the tables' names on a scratch database before creating any.
            let mut scratch = Database::<P>::open(phasedb_txn::Config {
                epoch_interval: std::time::Duration::ZERO,
                ..Default::default()
            });
            procs.create_tables(&mut scratch);
            if let Some(t) = scratch
                .tables()
                .iter()
                .find(|t| catalog.find(t.name()).is_some())
            {
                return Err(format!("table {} exists", t.name()));
            }
            procs.create_tables(db);
            if load {
                procs.load_shared(db);
                for p in 0..procs.partitions() {
                    procs.load_partition(db, p);
                }
            }
            installed.tpcc_hints = Some(DeliveryHints::new(procs.partitions()));
            installed.tpcc = Some(procs);
        }
        _ => return Err(format!("no setup procedure {name}")),
    }
    for t in &db.tables()[first as usize..] {
        catalog.add(t.id(), def_of(t.name(), t.schema(), t.is_ordered()));
    }
    Ok(vec![Value::U64(first as u64)])
}

/// An engine thread's generator of TPC-C inputs.
pub struct Generators {
    index: usize,
    tpcc: Option<TpccGen>,
    terminal: TerminalState,
}

impl Generators {
    /// The generators of engine thread `index`.
    pub fn new(index: usize) -> Generators {
        Generators {
            index,
            tpcc: None,
            terminal: TerminalState::new(index),
        }
    }
}

/// Runs procedure `name`: `Ok(Err(..))` is a bad call, `Ok(Ok(..))` its values, `Err` the
/// engine's verdict on the transaction.
pub fn call<P: Protocol>(
    name: &str,
    args: &[Value],
    installed: &Installed,
    gens: &mut Generators,
    worker: &mut Worker<'_, P>,
) -> Result<TxResult<Vec<Value>>, BadCall> {
    match name {
        "ycsb" => {
            let procs = installed.ycsb.as_ref().ok_or("call ycsb.setup first")?;
            if args.len() != 9 {
                return Err("ycsb takes 4 (key, write) pairs and a value".into());
            }
            let rows = procs.config().rows_per_partition;
            let mut req = YcsbRequest {
                ops: [YcsbOp::default(); 4],
                value: u64_arg(args, 8, "value")? as u16,
            };
            for i in 0..req.ops.len() {
                let key = u64_arg(args, 2 * i, "key")?;
                if key >= rows {
                    return Err(format!("key {key} is past the {rows} rows"));
                }
                if req.ops[..i].iter().any(|o| o.key == key) {
                    return Err(format!("key {key} appears twice"));
                }
                req.ops[i] = YcsbOp {
                    key,
                    write: u64_arg(args, 2 * i + 1, "write")? != 0,
                };
            }
            Ok(procs.run(&req, worker).map(|()| vec![]))
        }
        "tpcc.new_order" | "tpcc.payment" => {
            let procs = installed.tpcc.as_ref().ok_or("call tpcc.setup first")?;
            let w = u64_arg(args, 0, "warehouse")?;
            if w == 0 || w > procs.partitions() as u64 {
                return Err(format!("warehouse {w} is not 1..={}", procs.partitions()));
            }
            let index = gens.index;
            let base = installed.tpcc_origin_base;
            let g = gens
                .tpcc
                .get_or_insert_with(|| procs.generator(base + index, 0x5eed ^ index as u64));
            let want_new_order = name == "tpcc.new_order";
            let req = loop {
                // The mix draws NewOrder and Payment alike; keep drawing until the one asked for.
                let req = procs.generate(g, (w - 1) as u32, 0.01);
                if matches!(req, TpccRequest::NewOrder(_)) == want_new_order {
                    break req;
                }
            };
            // Run here rather than by `procs.run`, to answer what the transaction made: the new
            // order's district and id, or the payment's history row.
            let t = procs.tables();
            Ok(match &req {
                TpccRequest::NewOrder(input) => worker
                    .execute(NEW_ORDER, |tx| new_order::run(tx, t, input))
                    .map(|o| vec![Value::U64(input.d_id as u64), Value::U64(o.o_id as u64)]),
                TpccRequest::Payment(input) => {
                    let scratch = gens.terminal.scratch();
                    worker
                        .execute(PAYMENT, |tx| payment::run(tx, t, input, scratch))
                        .map(|_| vec![Value::U64(input.history_key)])
                }
            })
        }
        _ if tpcc_terminal::NAMES.contains(&name) => {
            let (Some(procs), Some(hints)) = (&installed.tpcc, &installed.tpcc_hints) else {
                return Err("call tpcc.setup first".into());
            };
            tpcc_terminal::call(name, args, procs, hints, &mut gens.terminal, worker)
        }
        _ => Err(format!("no procedure {name}")),
    }
}
