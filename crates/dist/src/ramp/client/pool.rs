//! Many clients multiplexed on one endpoint: replies find their client by the slot in the request id.

use crate::ramp::client::{ClientSettings, Router, TxnClient};
use crate::ramp::msg::{Msg, Outcome, TxnSpec};
use phasedb_net::{Addr, Transport};

/// A fixed set of clients sharing one endpoint's connections.
pub struct ClientPool {
    clients: Vec<TxnClient>,
}

impl ClientPool {
    /// `n` clients with ids `first_id..first_id + n`.
    pub fn new(n: usize, first_id: u32, settings: ClientSettings, router: &Router) -> Self {
        ClientPool {
            clients: (0..n)
                .map(|i| TxnClient::new(i as u32, first_id + i as u32, settings, router.clone()))
                .collect(),
        }
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// True when the pool has no client.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Client `slot`.
    pub fn client(&mut self, slot: u32) -> &mut TxnClient {
        &mut self.clients[slot as usize]
    }

    /// Starts `txn` on client `slot`.
    pub fn start<T: Transport<Msg>>(&mut self, net: &mut T, slot: u32, txn: TxnSpec) {
        self.clients[slot as usize].start(net, txn);
    }

    /// Routes a reply to its client; returns the client's slot and outcome when it finishes.
    pub fn on_reply<T: Transport<Msg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        msg: Msg,
    ) -> Option<(u32, Outcome)> {
        let slot = TxnClient::slot_of(msg.reply_rid()?);
        let client = self.clients.get_mut(slot as usize)?;
        client.on_reply(net, from, msg).map(|o| (slot, o))
    }

    /// Lets every client resend what timed out.
    pub fn on_tick<T: Transport<Msg>>(&mut self, net: &mut T) {
        for c in &mut self.clients {
            c.on_tick(net);
        }
    }

    /// Calls `f` with the server of every request a client has waited on past the resend timeout.
    pub fn for_each_overdue(&self, now: u64, mut f: impl FnMut(Addr)) {
        for c in &self.clients {
            c.for_each_overdue(now, &mut f);
        }
    }

    /// Requests the clients resent after their resend timeout.
    pub fn resends(&self) -> u64 {
        self.clients.iter().map(TxnClient::resends).sum()
    }

    /// True when no client is running a transaction.
    pub fn all_idle(&self) -> bool {
        self.clients.iter().all(|c| c.is_idle())
    }

    /// Slot of an idle client, if any.
    pub fn idle_slot(&self) -> Option<u32> {
        self.clients
            .iter()
            .position(|c| c.is_idle())
            .map(|i| i as u32)
    }
}
