//! E-PCI's client side: the choice of a per-transaction coordinator partition.

use crate::ramp::msg::Ts;
use phasedb_net::Addr;

/// The coordinator of write `ts`: one participant, chosen by a hash of the timestamp so every
/// message about the transaction agrees without storing the choice.
pub fn coordinator(ts: Ts, participants: &[Addr]) -> Addr {
    let h = ts.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    participants[(h % participants.len() as u64) as usize]
}
