//! The fall-back to Dist-OCC when no full replica is left (STAR §7.2: "If no active node has a
//! full copy of the database, the system falls back to a mode in which a distributed concurrency
//! control algorithm is employed, as in partitioning-based systems").
//!
//! The steps, in the order they run:
//!
//! 1. **Who decides.** With no full replica to coordinate, the paper names no one, so the role
//!    goes by a rule every survivor computes from the same facts (the failures announced so far,
//!    the same on every live node): the *fall-back leader* is the lowest node that is neither
//!    failed nor recovering ([`Layout::fall_back_leader`](crate::star::Layout::fall_back_leader)).
//!    When the last full replica (the coordinator with no live successor) falls silent, the leader
//!    takes over as a successor would (`failover`): it announces the coordinator failed with the
//!    next view, every live node takes back what the coordinator replicated in the interrupted
//!    phase (nothing unacknowledged survives), and each partition the coordinator mastered is
//!    re-mastered on its first surviving secondary. A partition with no live copy left stops the
//!    cluster and is named ([`StarNode::lost`]). The layout then names the leader coordinator.
//! 2. **The interrupted phase ends.** Nobody executes STAR transactions any more (a partial
//!    replica cannot run a single-master phase). The leader starts the phase's replication fence
//!    everywhere at once; once every live node ended it (with the new view), every write of the
//!    phase is on every live replica.
//! 3. **The switch.** The leader tells every live node [`StarMsg::FallBack`] with the next phase
//!    number and the view, and each node, on it: releases the results held for the ended phase,
//!    puts its database under the single-master rule (Silo's OCC) and from then on runs as a
//!    [`DistNode`] of Dist-OCC (the baseline's code, [`crate::star::baselines::dist`]) over the
//!    layout after the failure, with the node's settings (`replication`: group commit or
//!    synchronous, `virtual_workers`, `group_commit_ns`). Its group commits are numbered on from
//!    the phase after the interrupted one, so epochs and TIDs keep growing. Requests queued for
//!    STAR's phases move to their home's Dist-OCC queue (or are forwarded to their home).
//! 4. **Messages in between.** Nodes switch at different moments: a node that has not switched
//!    yet keeps the Dist-OCC messages that reach it (remote reads, two-phase commit, the new
//!    replication streams — whose batches carry a phase past the interrupted one, which no STAR
//!    batch can) and hands them to its [`DistNode`] when it switches. STAR's own messages that
//!    arrive after the switch are stale and dropped by the [`DistNode`].
//!
//! From the switch on the node answers every request and query through its [`DistNode`], and its
//! [`StarStats::fall_back`](crate::star::StarStats) says since when the cluster runs in fall-back
//! mode. What it does not do yet: detect failures under the fall-back (Dist-OCC here assumes no
//! further failure, like the baseline), and go back to STAR's phases when a full replica
//! restarts and recovers (the paper's "when parallel recovery finishes, the system goes back to
//! the normal mode"): a node that restarts under the fall-back is not let back in, and one still
//! copying its partitions when the fall-back begins does not finish its copy.

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_check::History;
use phasedb_net::{Addr, Node, Transport};
use phasedb_txn::{Procedures, StarMode};

use crate::star::baselines::dist::{DistNode, DistProtocol};
use crate::star::msg::{Answer, Phase, Query, StarMsg};
use crate::star::node::StarNode;
use crate::star::requests::{Origin, Pending};
use crate::star::stats::{FallBackStats, StarStats};

/// A node that fell back: the Dist-OCC node it runs as, and when it switched.
pub(crate) struct FallBack<'db, W: Procedures> {
    pub(crate) dist: Box<DistNode<'db, W>>,
    pub(crate) stats: FallBackStats,
}

/// Whether `msg` belongs to Dist-OCC, from a node that switched already: its two-phase commit and
/// remote reads, its acknowledgements, and replication batches of a phase past `phase` (the
/// interrupted one, the last STAR phase).
fn is_dist_message(msg: &StarMsg, phase: Phase) -> bool {
    match msg {
        StarMsg::Fetch { .. }
        | StarMsg::Rows { .. }
        | StarMsg::Prepare { .. }
        | StarMsg::Validate { .. }
        | StarMsg::Vote { .. }
        | StarMsg::Decide { .. }
        | StarMsg::Release { .. }
        | StarMsg::Acked { .. } => true,
        StarMsg::Replicate { phase: p, .. } => *p > phase,
        _ => false,
    }
}

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Whether the last full replica failed while the cluster ran: the node waits for the switch
    /// to Dist-OCC, or made it.
    pub(crate) fn falling_back(&self) -> bool {
        self.phase > 0 && !self.layout.has_full_replica()
    }

    /// Whether the node runs Dist-OCC now.
    pub fn in_fall_back(&self) -> bool {
        self.fall_back.is_some()
    }

    /// Keeps `msg` from `from` for the [`DistNode`] if it is a Dist-OCC message that came before
    /// this node's switch; gives it back otherwise.
    pub(crate) fn keep_early(&mut self, from: Addr, msg: StarMsg) -> Option<StarMsg> {
        if self.falling_back() && is_dist_message(&msg, self.phase) {
            self.early.push((from, msg));
            return None;
        }
        Some(msg)
    }

    /// At the begin of a phase: batches kept as early that belong to it after all (a node behind
    /// the others when the last full replica failed) go to the replication inbox.
    pub(crate) fn replay_early_batches(&mut self) {
        let phase = self.phase;
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.early)
            .into_iter()
            .partition(|(_, m)| matches!(m, StarMsg::Replicate { phase: p, .. } if *p <= phase));
        self.early = later;
        for (from, msg) in now {
            if let StarMsg::Replicate {
                phase: p,
                seq,
                bytes,
            } = msg
            {
                self.inbox
                    .receive_of(self.db, from, seq, p, bytes, &mut self.replication);
            }
        }
    }

    /// On the fall-back leader (the coordinator once no full replica is left): fences the
    /// interrupted phase everywhere at once (step 2).
    pub(crate) fn fence_for_fall_back<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if self.fall_back.is_some() || self.liveness.lost.is_some() || self.fence.started() {
            return;
        }
        let phase = self.phase;
        for n in (0..self.layout.nodes()).filter(|&n| n != self.me && !self.layout.is_failed(n)) {
            net.send(n, StarMsg::StartFence { phase });
        }
        self.start_fence(net, phase);
    }

    /// On the fall-back leader, once every live node ended the interrupted phase's fence: tells
    /// them to switch, with `phase` the first group of the fall-back, and switches (step 3).
    pub(crate) fn announce_fall_back<T: Transport<StarMsg>>(&mut self, net: &mut T, phase: Phase) {
        if self.fall_back.is_some() || self.liveness.lost.is_some() {
            return;
        }
        let view = self.liveness.view;
        for n in (0..self.layout.nodes()).filter(|&n| n != self.me && !self.layout.is_failed(n)) {
            net.send(n, StarMsg::FallBack { phase, view });
        }
        self.switch_to_dist(net, phase, view);
    }

    /// The switch (step 3): the ended phase's results go out, and the node runs Dist-OCC from
    /// group `phase` on.
    pub(crate) fn switch_to_dist<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        phase: Phase,
        view: u64,
    ) {
        if self.fall_back.is_some() || self.layout.has_full_replica() || phase <= self.phase {
            return;
        }
        self.release(net);
        self.db.set_star_mode(StarMode::SingleMaster);
        let dist = DistNode::new(
            self.me,
            DistProtocol::Occ,
            self.layout.clone(),
            self.settings.clone(),
            self.db,
            self.workload,
        );
        let mut dist = match dist {
            Ok(d) => d,
            Err(e) => {
                self.liveness.lost = Some(format!("the fall-back to Dist-OCC failed: {e}"));
                return;
            }
        };
        dist.start_at(phase);
        let mut queued: Vec<Pending<W::Request>> = Vec::new();
        for q in &mut self.queues.single {
            queued.extend(q.drain(..));
        }
        queued.extend(self.queues.cross.drain(..));
        for p in queued {
            let touched = self.workload.touched(&p.req);
            let home = self.layout.primary(touched.first());
            if home == self.me {
                dist.adopt(p);
                continue;
            }
            match p.origin {
                Origin::Client { addr, rid } => match postcard::to_stdvec(&p.req) {
                    Ok(body) => {
                        self.requests.forwarded += 1;
                        net.send(
                            home,
                            StarMsg::Forward {
                                client: addr,
                                rid,
                                body,
                            },
                        );
                    }
                    Err(e) => self.reply_error(net, p.origin, format!("cannot forward: {e}")),
                },
                Origin::Via { .. } => {
                    let text = format!(
                        "the cluster fell back to Dist-OCC; the request's home is node {home}"
                    );
                    self.reply_error(net, p.origin, text);
                }
                Origin::Local => self.requests.discarded += 1,
            }
        }
        self.coordinator = None;
        self.fall_back = Some(FallBack {
            dist: Box::new(dist),
            stats: FallBackStats {
                since_ns: net.now(),
                phase,
                view,
            },
        });
        for (from, msg) in std::mem::take(&mut self.early) {
            self.on_fall_back_message(net, from, msg);
        }
        if let Some(f) = &mut self.fall_back {
            f.dist.on_tick(net);
        }
    }

    /// A message under the fall-back: queries are answered with this node's counters from
    /// before and after the switch; everything else goes to the [`DistNode`].
    pub(crate) fn on_fall_back_message<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        from: Addr,
        msg: StarMsg,
    ) {
        match msg {
            StarMsg::Query { rid, query } => {
                let answer = match query {
                    Query::Stats => Answer::Stats(Box::new(self.stats())),
                    Query::Load(on) => {
                        self.set_local_load(on);
                        Answer::Stats(Box::new(self.stats()))
                    }
                    Query::History => Answer::History(self.take_history()),
                    q => match &mut self.fall_back {
                        Some(f) => f.dist.answer_query(q),
                        None => return,
                    },
                };
                net.send(from, StarMsg::Answer { rid, answer });
            }
            msg => {
                if let Some(f) = &mut self.fall_back {
                    f.dist.on_message(net, from, msg);
                }
            }
        }
    }

    /// This node's counters under the fall-back: those of its STAR phases and of its Dist-OCC
    /// groups added up, the phase the Dist-OCC node's, and since when it fell back.
    pub(crate) fn fall_back_stats(&self, star: StarStats) -> StarStats {
        let Some(f) = &self.fall_back else {
            return star;
        };
        let dist = f.dist.stats();
        let mut s = star;
        s.merge(&dist);
        s.phase = dist.phase;
        s.fall_back = Some(f.stats);
        s
    }

    /// The Dist-OCC workers' histories, under the fall-back.
    pub(crate) fn fall_back_histories(&mut self) -> Vec<History> {
        self.fall_back
            .as_mut()
            .map(|f| f.dist.take_worker_histories())
            .unwrap_or_default()
    }
}
