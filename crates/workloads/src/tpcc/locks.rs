//! The read/write sets of NewOrder and Payment, known before they run, for deterministic
//! schedulers such as Calvin's lock manager (Thomson et al. 2012, §3).
//!
//! NewOrder reads its warehouse and customer, writes its district (whose next order id also
//! covers the order, new-order and order-line rows it inserts) and the stock row of every line.
//! Payment writes its warehouse, its district and its customer. Customers are locked a district at
//! a time: a Payment by last name then needs no reconnaissance step (Calvin's OLLP) to find its
//! customer before it is sequenced, at the price of Payments to one district's customers running
//! one after another. Items are read-only and never locked; history rows are inserted under keys
//! unique to each generator and need no lock.
//!
//! The rows they read are known as well, but for a Payment by last name, whose customer is found
//! through the last-name index as it runs.

use phasedb_txn::{PartitionId, TableId};

use super::customer::CustomerBy;
use super::schema::{customer_key, district_key, stock_key, warehouse_key};
use super::{TpccProcedures, TpccRequest};

const WAREHOUSE: u64 = 1;
const DISTRICT: u64 = 2;
const CUSTOMERS: u64 = 3;
const STOCK: u64 = 4;

fn unit(kind: u64, w: u32, d: u32, item: u32) -> u64 {
    (kind << 60) | ((w as u64) << 32) | ((d as u64 & 0xff) << 24) | (item as u64 & 0xff_ffff)
}

impl TpccProcedures {
    /// Appends `req`'s locks to `out` as (partition, unit key, exclusive); keys are unique across
    /// units and partitions, and a unit may appear twice (shared and exclusive).
    pub fn lock_set(&self, req: &TpccRequest, out: &mut Vec<(PartitionId, u64, bool)>) {
        let p = Self::partition;
        match req {
            TpccRequest::NewOrder(i) => {
                out.push((p(i.w_id), unit(WAREHOUSE, i.w_id, 0, 0), false));
                out.push((p(i.w_id), unit(DISTRICT, i.w_id, i.d_id, 0), true));
                out.push((p(i.w_id), unit(CUSTOMERS, i.w_id, i.d_id, 0), false));
                for l in i.lines.iter().take(i.ol_cnt) {
                    let key = unit(STOCK, l.supply_w_id, 0, l.i_id);
                    out.push((p(l.supply_w_id), key, true));
                }
            }
            TpccRequest::Payment(i) => {
                out.push((p(i.w_id), unit(WAREHOUSE, i.w_id, 0, 0), true));
                out.push((p(i.w_id), unit(DISTRICT, i.w_id, i.d_id, 0), true));
                out.push((p(i.c_w_id), unit(CUSTOMERS, i.c_w_id, i.c_d_id, 0), true));
            }
        }
    }
}

impl TpccProcedures {
    /// Appends the rows (table, key) `req` reads, items aside (they never change), and returns
    /// true; false for a Payment by last name, whose customer row is known only once it runs.
    pub fn read_rows(&self, req: &TpccRequest, out: &mut Vec<(TableId, u64)>) -> bool {
        let t = self.tables();
        match req {
            TpccRequest::NewOrder(i) => {
                out.push((t.warehouse, warehouse_key(i.w_id)));
                out.push((t.district, district_key(i.w_id, i.d_id)));
                out.push((t.customer, customer_key(i.w_id, i.d_id, i.c_id)));
                for l in i.lines.iter().take(i.ol_cnt) {
                    out.push((t.stock, stock_key(l.supply_w_id, l.i_id)));
                }
                true
            }
            TpccRequest::Payment(i) => match i.customer {
                CustomerBy::Id(c) => {
                    out.push((t.warehouse, warehouse_key(i.w_id)));
                    out.push((t.district, district_key(i.w_id, i.d_id)));
                    out.push((t.customer, customer_key(i.c_w_id, i.c_d_id, c)));
                    true
                }
                CustomerBy::LastName(_) => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::{ProceduresMix, TpccProceduresConfig};
    use phasedb_txn::Procedures;

    #[test]
    fn every_touched_partition_is_locked_and_keys_do_not_collide_across_units() {
        let w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: 4,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        });
        let mut g = w.generator(0, 7);
        let mut out = Vec::new();
        for _ in 0..200 {
            let req = w.generate(&mut g, 1, 1.0);
            out.clear();
            w.lock_set(&req, &mut out);
            for &p in w.touched(&req).as_slice() {
                assert!(out.iter().any(|l| l.0 == p), "partition {p} unlocked");
            }
            assert!(out.iter().any(|l| l.2), "every transaction writes");
        }
        assert_ne!(unit(DISTRICT, 1, 2, 0), unit(CUSTOMERS, 1, 2, 0));
        assert_ne!(unit(STOCK, 1, 0, 5), unit(STOCK, 2, 0, 5));
    }

    /// The rows named are the rows a run reads (a dry run's read set), items aside.
    #[test]
    fn the_rows_named_are_the_rows_a_run_reads() {
        let mut w = TpccProcedures::new(TpccProceduresConfig {
            warehouses: 2,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        });
        let mut db = phasedb_txn::Database::<phasedb_txn::Occ>::open(Default::default());
        w.create_tables(&mut db);
        for p in 0..2 {
            w.load_partition(&db, p);
        }
        w.load_shared(&db);
        let mut worker = db.worker();
        worker.set_dry_run(true);
        let mut g = w.generator(0, 11);
        let (mut named, mut checked) = (Vec::new(), 0);
        for i in 0..300 {
            let req = w.generate(&mut g, i % 2, 0.5);
            named.clear();
            if !w.read_rows(&req, &mut named) {
                continue;
            }
            if w.run(&req, &mut worker).is_err() {
                continue; // an invalid item: the run stopped early
            }
            let mut read: Vec<(TableId, u64)> = worker
                .prepared_reads()
                .map(|(t, k, _, _)| (t, k))
                .filter(|&(t, _)| t != w.tables().item)
                .collect();
            read.sort_unstable();
            read.dedup();
            named.sort_unstable();
            named.dedup();
            assert_eq!(named, read, "request {i}: {req:?}");
            checked += 1;
        }
        assert!(checked > 100, "{checked} requests checked");
    }
}
