//! Hand-made anomalous histories shared by the checker and adya tests.

use super::{r, txn, w};
use phasedb_check::History;

/// Write skew (G2): T1 reads x0,y0 writes x1; T2 reads x0,y0 writes y1.
pub fn write_skew() -> History {
    History::from_iter([
        txn(1, vec![r(0, 0), r(1, 0)], vec![w(0, 1, 0)]),
        txn(2, vec![r(0, 0), r(1, 0)], vec![w(1, 2, 0)]),
    ])
}

/// Read skew (G-single): T1 installs x1 and y2; T2 reads x0 (before T1)
/// and y2 (after T1).
pub fn read_skew() -> History {
    History::from_iter([
        txn(2, vec![r(0, 0), r(1, 2)], vec![]),
        txn(1, vec![], vec![w(0, 1, 0), w(1, 2, 0)]),
    ])
}

/// A cycle mixing all edge kinds: T1 -wr(x)-> T2 -ww(y)-> T3 -rw(z)-> T1.
pub fn three_cycle() -> History {
    History::from_iter([
        txn(3, vec![r(2, 0)], vec![w(1, 4, 3)]),
        txn(1, vec![], vec![w(0, 1, 0), w(2, 2, 0)]),
        txn(2, vec![r(0, 1)], vec![w(1, 3, 0)]),
    ])
}

/// T1 and T2 both read x0 and both replace it: a lost update.
pub fn lost_update() -> History {
    History::from_iter([
        txn(1, vec![r(0, 0)], vec![w(0, 1, 0)]),
        txn(2, vec![r(0, 0)], vec![w(0, 2, 0)]),
    ])
}
