//! Requests: where each one runs, the queues it waits in, and the results held until their phase
//! ends (STAR §4.3, §7.1).
//!
//! - **Routing.** A single-partition request runs on its partition's primary in a partitioned
//!   phase; a cross-partition one on the coordinator in a single-master phase. A node that gets a
//!   request it does not run forwards it once to the node that does ([`StarMsg::Forward`]); the
//!   result comes back the same way and the first node answers its client (a client endpoint only
//!   dials the node it talks to, so only that node can reach it). A request that names an unknown
//!   partition, or a forwarded request that reached the wrong node, is answered with an error.
//! - **Queues.** Requests wait in their partition's queue (single-partition) or the coordinator's
//!   cross-partition queue until a phase of their kind runs them: one that arrives in the other
//!   kind of phase waits for the next one.
//! - **Holding results.** A transaction's outcome is released to its client only once the phase
//!   it ran in has ended everywhere — after the replication fence, when every replica has its
//!   writes (§7.1) — which a node learns from the next phase's begin.
//!
//! [`StarMsg::Forward`]: crate::star::msg::StarMsg::Forward

use std::collections::{HashMap, VecDeque};

use hdrhistogram::Histogram;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{PartitionId, Touched};

use crate::star::layout::Layout;
use crate::star::msg::{Outcome, Phase, StarMsg};
use crate::star::stats::TypeCounts;

/// Most requests one node keeps waiting; more are refused with an error.
pub const MAX_QUEUED: usize = 1 << 20;

/// Who a request's outcome goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A client that sent it to this node.
    Client { addr: Addr, rid: u64 },
    /// A client of node `via`, which forwarded it here.
    Via { via: Addr, client: Addr, rid: u64 },
    /// This node's own load.
    Local,
}

/// A request waiting to run.
pub(crate) struct Pending<R> {
    pub(crate) origin: Origin,
    pub(crate) req: R,
    /// When it arrived or was generated (the transport's clock, ns).
    pub(crate) since: u64,
}

/// A transaction that ran, waiting for its phase to end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub(crate) origin: Origin,
    pub(crate) ty: usize,
    pub(crate) committed: bool,
    /// It touched several partitions (STAR: it ran in a single-master phase).
    pub(crate) cross: bool,
    pub(crate) since: u64,
}

impl Held {
    /// Releases the result (STAR at the end of its phase, the baselines at their group commit or
    /// replication acknowledgement): counts it, records a commit's latency from `since` to `now`,
    /// and answers its origin. `phase` is the phase (or group) it committed in.
    pub(crate) fn release<T: Transport<StarMsg>>(
        self,
        net: &mut T,
        phase: Phase,
        types: &mut [TypeCounts],
        latency: &mut Histogram<u64>,
    ) {
        if let Some(t) = types.get_mut(self.ty) {
            if self.committed {
                t.committed += 1;
                t.committed_cross += self.cross as u64;
            } else {
                t.aborted += 1;
            }
        }
        if self.committed {
            latency.saturating_record(net.now().saturating_sub(self.since).max(1));
        }
        let outcome = if self.committed {
            Outcome::Committed { phase }
        } else {
            Outcome::Aborted { phase }
        };
        answer(net, self.origin, outcome);
    }
}

/// Sends `outcome` to the client of a request that came from `origin` (through the node that
/// forwarded it, if any).
pub(crate) fn answer<T: Transport<StarMsg>>(net: &mut T, origin: Origin, outcome: Outcome) {
    match origin {
        Origin::Client { addr, rid } => net.send(addr, StarMsg::Reply { rid, outcome }),
        Origin::Via { via, client, rid } => net.send(
            via,
            StarMsg::Forwarded {
                client,
                rid,
                outcome,
            },
        ),
        Origin::Local => {}
    }
}

/// The requests a node forwarded for its clients and has no outcome of yet, by the node they went
/// to: when that node is declared failed, its outcomes will never come back, and each client is
/// told so at once instead of waiting out its timeout (§7: a failure costs no client its answer).
#[derive(Default)]
pub(crate) struct Forwarding {
    to: HashMap<(Addr, u64), Addr>,
}

impl Forwarding {
    /// Client `client`'s request `rid` went to node `to`.
    pub(crate) fn sent(&mut self, client: Addr, rid: u64, to: Addr) {
        self.to.insert((client, rid), to);
    }

    /// Its outcome came back.
    pub(crate) fn answered(&mut self, client: Addr, rid: u64) {
        self.to.remove(&(client, rid));
    }

    /// Node `node` failed: answers each client whose request went there with an error that says
    /// the outcome is unknown (the node may have committed it in a phase that ended before it
    /// failed, so it is not an abort); returns how many.
    pub(crate) fn orphan<T: Transport<StarMsg>>(&mut self, net: &mut T, node: Addr) -> u64 {
        let mut n = 0;
        self.to.retain(|&(client, rid), to| {
            if *to != node {
                return true;
            }
            n += 1;
            let text = format!(
                "node {node}, which ran this request, failed before answering: its outcome is \
                 unknown (committed if its phase had ended, else discarded)"
            );
            net.send(
                client,
                StarMsg::Reply {
                    rid,
                    outcome: Outcome::Error(text),
                },
            );
            false
        });
        n
    }
}

/// Where a request runs, as seen from one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// In this node's queue of the partition it masters at this index.
    Here(usize),
    /// In this node's cross-partition queue (this node coordinates).
    Cross,
    /// On another node.
    Forward(Addr),
    /// Nowhere: the reason.
    Refuse(String),
}

/// Where a request touching `touched` runs, seen from `me`, which masters `mastered`.
pub(crate) fn route(
    layout: &Layout,
    me: Addr,
    mastered: &[PartitionId],
    touched: &Touched,
) -> Route {
    let parts = touched.as_slice();
    if parts.is_empty() {
        return Route::Refuse("the request touches no partition".into());
    }
    if let Some(p) = parts.iter().find(|&&p| p >= layout.partitions()) {
        return Route::Refuse(format!(
            "the request touches partition {p}, but there are {} partitions",
            layout.partitions()
        ));
    }
    if touched.is_cross() {
        return if me == layout.coordinator() {
            Route::Cross
        } else {
            Route::Forward(layout.coordinator())
        };
    }
    let p = parts[0];
    match mastered.iter().position(|&m| m == p) {
        Some(i) => Route::Here(i),
        None => Route::Forward(layout.primary(p)),
    }
}

/// The requests waiting on one node, and the results it holds.
pub(crate) struct Queues<R> {
    /// Per partition this node masters (in [`Layout::mastered`] order).
    pub(crate) single: Vec<VecDeque<Pending<R>>>,
    /// Cross-partition requests (coordinator only).
    pub(crate) cross: VecDeque<Pending<R>>,
    /// Results of the current phase.
    pub(crate) held: Vec<Held>,
}

impl<R> Queues<R> {
    /// Empty queues for `mastered` partitions.
    pub(crate) fn new(mastered: usize) -> Self {
        Queues {
            single: (0..mastered).map(|_| VecDeque::new()).collect(),
            cross: VecDeque::new(),
            held: Vec::new(),
        }
    }

    /// Requests waiting.
    pub(crate) fn queued(&self) -> usize {
        self.cross.len() + self.queued_single()
    }

    /// Single-partition requests waiting.
    pub(crate) fn queued_single(&self) -> usize {
        self.single.iter().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_net::StarConfig;

    fn touched(parts: &[PartitionId]) -> Touched {
        let mut t = Touched::home(parts[0]);
        for &p in &parts[1..] {
            t.add(p);
        }
        t
    }

    #[test]
    fn requests_route_to_their_primary_or_the_coordinator() {
        let layout = Layout::new(3, &StarConfig::new(4)).unwrap();
        // Node 1 masters partitions 0 and 2, node 2 partitions 1 and 3.
        let mastered = layout.mastered(1);
        assert_eq!(route(&layout, 1, &mastered, &touched(&[2])), Route::Here(1));
        assert_eq!(
            route(&layout, 1, &mastered, &touched(&[1])),
            Route::Forward(2)
        );
        assert_eq!(
            route(&layout, 1, &mastered, &touched(&[0, 1])),
            Route::Forward(0)
        );
        assert_eq!(route(&layout, 0, &[], &touched(&[0, 1])), Route::Cross);
        assert_eq!(route(&layout, 0, &[], &touched(&[3])), Route::Forward(2));
        assert!(matches!(
            route(&layout, 0, &[], &touched(&[0, 9])),
            Route::Refuse(e) if e.contains("partition 9")
        ));
    }
}
