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

use phasedb_txn::PartitionId;

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
}
