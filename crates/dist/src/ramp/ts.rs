//! Unique transaction timestamps from a client id and a per-client sequence number.
//!
//! `ts = seq << CLIENT_BITS | client`. The sequence also jumps past any timestamp the client observes
//! (a Lamport clock), so a client's later writes tend to win last-writer-wins races, and its own
//! timestamps only grow (the paper's per-client session order).

use crate::ramp::msg::Ts;

/// Bits of the client id in a timestamp.
pub const CLIENT_BITS: u32 = 24;
/// The largest client id.
pub const MAX_CLIENT: u32 = (1 << CLIENT_BITS) - 1;
/// Client ids from here on belong to transactions that servers run as proxies.
pub const PROXY_CLIENT_BASE: u32 = 1 << 22;

/// One client's timestamp generator.
#[derive(Clone, Debug)]
pub struct TsGen {
    client: u32,
    seq: u64,
}

impl TsGen {
    /// A generator for client `client` (at most [`MAX_CLIENT`]).
    pub fn new(client: u32) -> TsGen {
        TsGen {
            client: client & MAX_CLIENT,
            seq: 0,
        }
    }

    /// The next timestamp: unique across clients, increasing for this one.
    pub fn next_ts(&mut self) -> Ts {
        self.seq += 1;
        (self.seq << CLIENT_BITS) | self.client as u64
    }

    /// Moves the sequence past an observed timestamp.
    pub fn observe(&mut self, ts: Ts) {
        self.seq = self.seq.max(ts >> CLIENT_BITS);
    }

    /// The client id of a timestamp.
    pub fn client_of(ts: Ts) -> u32 {
        (ts & MAX_CLIENT as u64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_unique_across_clients_and_grow_past_observed_ones() {
        let mut a = TsGen::new(1);
        let mut b = TsGen::new(2);
        let (a1, b1) = (a.next_ts(), b.next_ts());
        assert_ne!(a1, b1);
        assert_eq!(TsGen::client_of(a1), 1);
        for _ in 0..10 {
            b.next_ts();
        }
        let seen = b.next_ts();
        a.observe(seen);
        let a2 = a.next_ts();
        assert!(a2 > seen && a2 > a1);
    }
}
