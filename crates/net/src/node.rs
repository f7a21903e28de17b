//! The sans-I/O interface shared by the TCP runtime and the simulator.

/// Where a message goes: a server node id (`0..CLIENT_ADDR_BASE`) or a client endpoint.
pub type Addr = u32;

/// Addresses at or above this belong to client endpoints, which dial servers but never listen.
pub const CLIENT_ADDR_BASE: Addr = 1 << 20;

/// True when `addr` names a client endpoint rather than a server.
pub fn is_client_addr(addr: Addr) -> bool {
    addr >= CLIENT_ADDR_BASE
}

/// What a node may do while handling an event: read the clock and send messages.
///
/// Both runtimes implement it, so a protocol state machine never knows whether it runs over TCP or
/// inside the simulator.
pub trait Transport<M> {
    /// Nanoseconds since the runtime started (virtual time under the simulator).
    fn now(&self) -> u64;
    /// Queues `msg` for `to`; delivery is asynchronous and, under the simulator, may fail.
    fn send(&mut self, to: Addr, msg: M);

    /// Sends `msg` while the caller keeps it (to resend it later). The TCP runtime encodes straight
    /// from the reference; the default sends a clone.
    fn send_copy(&mut self, to: Addr, msg: &M)
    where
        M: Clone,
    {
        self.send(to, msg.clone());
    }
}

/// A sans-I/O state machine: reacts to messages and ticks, never blocks and does no I/O itself.
pub trait Node {
    /// The message type exchanged with other nodes.
    type Msg;

    /// Called once before any other event.
    fn on_start<T: Transport<Self::Msg>>(&mut self, _net: &mut T) {}

    /// Handles one message from `from` (a node may send to itself; then `from` is its own address).
    fn on_message<T: Transport<Self::Msg>>(&mut self, net: &mut T, from: Addr, msg: Self::Msg);

    /// Called periodically; timeouts, retransmissions and garbage collection live here.
    fn on_tick<T: Transport<Self::Msg>>(&mut self, net: &mut T);

    /// The node crashed: forget volatile state. What remains models what a real node would recover
    /// from its log. The simulator calls it; a TCP node that crashes simply exits.
    fn on_crash(&mut self) {}

    /// True when the node has finished its work and the runtime may stop driving it.
    fn is_done(&self) -> bool {
        false
    }

    /// True while the node has work of its own to go on with (a node that runs transactions in
    /// slices, such as STAR's): the TCP runtime then handles whatever input is ready without waiting
    /// for more and calls [`Node::on_tick`] again at once, instead of polling and sleeping until the
    /// next input or tick. The simulator keeps its ticks, so runs stay deterministic.
    fn busy(&self) -> bool {
        false
    }
}
