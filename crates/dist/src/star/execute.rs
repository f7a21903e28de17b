//! Running transactions on a node's one thread, in slices between messages.
//!
//! - **Partitioned phase** (§4.1): the node's masters — one worker per partition it masters — take
//!   turns, one transaction each, running their partition's waiting requests (and, with the
//!   node's own load, generated single-partition ones) under the engine's partitioned rule. Each
//!   commit's records go to the partition's secondaries as operation records (value records with
//!   hybrid replication off).
//! - **Single-master phase** (§4.2): the coordinator runs the cross-partition requests (and its
//!   load's, within the quota of [`crate::star::phase`]) under Silo's OCC, and sends value records
//!   to the other holders of each written record's partition.
//!
//! A slice stops after `slice_txns` transactions (a count, so the simulator stays deterministic),
//! after `slice_ns` of the transport's clock, or when no work is left; then the replication
//! buffers go out and the node handles its messages. Results wait in the held list until the
//! phase ends ([`crate::star::requests`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::Transport;
use phasedb_txn::{Procedures, ReplicationMode, TxError};

use crate::star::msg::{PhaseKind, StarMsg};
use crate::star::node::StarNode;
use crate::star::requests::{Held, Origin, Pending};

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Whether the current phase has transactions for this node to run.
    pub(crate) fn has_work(&self) -> bool {
        match PhaseKind::of(self.phase) {
            PhaseKind::Partitioned => {
                !self.masters.is_empty()
                    && (self.queues.queued_single() > 0 || self.generates_single())
            }
            PhaseKind::SingleMaster => self.has_cross_work(),
        }
    }

    /// Whether the coordinator has cross-partition work: waiting requests or load quota.
    pub(crate) fn has_cross_work(&self) -> bool {
        self.sm_worker.is_some()
            && (!self.queues.cross.is_empty()
                || self
                    .coordinator
                    .as_ref()
                    .is_some_and(|c| c.cross_quota() > 0))
    }

    fn generates_single(&self) -> bool {
        self.settings.local_load && self.settings.cross_partition < 1.0
    }

    /// Runs one slice of the current phase's transactions, then sends the replication buffers.
    pub(crate) fn run_slice<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.executing() {
            return;
        }
        let start = net.now();
        let kind = PhaseKind::of(self.phase);
        let mut budget = self.settings.slice_txns;
        let mut idle = 0;
        while budget > 0 {
            let ran = match kind {
                PhaseKind::Partitioned => {
                    if self.masters.is_empty() {
                        break;
                    }
                    let i = self.next_master;
                    self.next_master = (i + 1) % self.masters.len();
                    match self.next_single(i, net.now()) {
                        Some(p) => {
                            self.run(net, Some(i), p);
                            true
                        }
                        None => false,
                    }
                }
                PhaseKind::SingleMaster => match self.next_cross(net.now()) {
                    Some(p) => {
                        self.run(net, None, p);
                        true
                    }
                    None => break,
                },
            };
            if ran {
                budget -= 1;
                idle = 0;
            } else {
                idle += 1;
                if idle >= self.masters.len() {
                    break;
                }
            }
            if net.now().saturating_sub(start) >= self.settings.slice_ns {
                break;
            }
        }
        self.outbox.flush(net, self.phase, &mut self.replication);
    }

    /// The next request of master `i`'s partition: a waiting one, else one of the node's load.
    fn next_single(&mut self, i: usize, now: u64) -> Option<Pending<W::Request>> {
        if let Some(p) = self.queues.single[i].pop_front() {
            return Some(p);
        }
        if !self.generates_single() {
            return None;
        }
        let home = self.masters[i].partition;
        let req = self.workload.generate(&mut self.generator, home, 0.0);
        let touched = self.workload.touched(&req);
        if touched.is_cross() || touched.first() != home {
            self.requests.discarded += 1;
            return None;
        }
        self.requests.generated += 1;
        Some(Pending {
            origin: Origin::Local,
            req,
            since: now,
        })
    }

    /// The coordinator's next cross-partition request: a waiting one, else one of its load.
    fn next_cross(&mut self, now: u64) -> Option<Pending<W::Request>> {
        if let Some(p) = self.queues.cross.pop_front() {
            return Some(p);
        }
        if self.coordinator.as_ref()?.cross_quota() == 0 {
            return None;
        }
        let home = self.next_home();
        let req = self.workload.generate(&mut self.generator, home, 1.0);
        self.coordinator.as_mut()?.on_cross_generated();
        self.requests.generated += 1;
        Some(Pending {
            origin: Origin::Local,
            req,
            since: now,
        })
    }

    /// A home partition for a generated cross-partition request, uniform over all partitions.
    fn next_home(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % self.layout.partitions() as u64) as u32
    }

    /// Runs one request on master `i`'s worker (partitioned phase) or the single-master worker,
    /// replicates what it wrote and holds its result for the end of the phase.
    fn run<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        master: Option<usize>,
        pending: Pending<W::Request>,
    ) {
        let ty = self.workload.txn_type(&pending.req);
        let kind = PhaseKind::of(self.phase);
        let mode = match kind {
            // §7.2: only value replication while a restarted node recovers.
            PhaseKind::Partitioned
                if self.settings.hybrid_replication && self.layout.recovering().is_empty() =>
            {
                ReplicationMode::Operation
            }
            _ => ReplicationMode::Value,
        };
        let worker = match master {
            Some(i) => &mut self.masters[i].worker,
            None => self
                .sm_worker
                .as_mut()
                .expect("only the coordinator runs the single-master phase"),
        };
        let result = self.workload.run(&pending.req, worker);
        self.report.ran += 1;
        if pending.origin == Origin::Local {
            self.report.generated += 1;
        }
        let committed = match result {
            Ok(()) => {
                self.outbox
                    .write(worker, self.workload, mode, kind, &mut self.replication);
                self.outbox
                    .flush_full(net, self.phase, &mut self.replication);
                true
            }
            Err(TxError::UserAbort) => false,
            Err(e) => {
                if let Some(t) = self.types.get_mut(ty) {
                    t.failed += 1;
                }
                let text = format!("the transaction failed: {e}");
                return self.reply_error(net, pending.origin, text);
            }
        };
        self.queues.held.push(Held {
            origin: pending.origin,
            ty,
            committed,
            cross: kind == PhaseKind::SingleMaster,
            since: pending.since,
        });
    }
}
