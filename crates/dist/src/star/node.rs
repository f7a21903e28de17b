//! A STAR node: the sans-I/O [`Node`] that embeds one node's engine and plays its part in phase
//! switching, the replication fence, the replication streams and request routing.
//!
//! A node borrows its database and workload (`'db`), so its workers — one per partition it
//! masters, plus one for the single-master phase on the coordinator — live as long as the node
//! without unsafe code: open the database with [`open_database`], then build the node over it.
//!
//! ```text
//! let mut workload = MyWorkload::new(...);
//! let db = open_database(&mut workload, &layout, me, false)?;
//! let mut node = StarNode::new(me, layout, StarSettings::default(), &db, &workload)?;
//! phasedb_net::tcp::run(&mut node, opts, shutdown).await?;   // or Simulator::add
//! ```
//!
//! Everything runs on the node's one event-loop thread: transactions run inline in slices
//! ([`crate::star::execute`]) between messages. The layout's `workers` is recorded but not yet
//! used: real worker threads per node are future work.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_check::History;
use phasedb_net::{Addr, Node, ReplicationSync, StarConfig, Transport};
use phasedb_txn::{Config, Database, PartitionId, Procedures, Star, StarMode, Touched, Worker};

use crate::star::control::read_rows;
use crate::star::failover::Liveness;
use crate::star::fallback::FallBack;
use crate::star::fence::Fence;
use crate::star::layout::{Layout, LayoutError};
use crate::star::msg::{
    Answer, MAX_REQUEST_BYTES, Outcome, PartitionDigest, Phase, PhaseKind, PhaseReport, Query,
    StarMsg,
};
use crate::star::phase::{Coordinator, PhaseClock};
use crate::star::recover::Recovery;
use crate::star::replicate::{Inbox, Outbox};
use crate::star::requests::{
    Forwarding, MAX_QUEUED, Origin, Pending, Queues, Route, answer, route,
};
use crate::star::stats::{
    LatencySnapshot, ReplicationCounts, RequestCounts, StarStats, TypeCounts, latency_histogram,
};

/// How a node runs, beyond its layout.
#[derive(Clone, Debug, PartialEq)]
pub struct StarSettings {
    /// Operation replication in partitioned phases (§5.2); false replicates values in both.
    pub hybrid_replication: bool,
    /// Share of cross-partition requests in the nodes' own load.
    pub cross_partition: f64,
    /// Whether nodes generate their own load (the paper's evaluation has no networked clients):
    /// single-partition requests for the partitions they master in partitioned phases, and on the
    /// coordinator cross-partition ones in single-master phases.
    pub local_load: bool,
    /// Most transactions a node runs in one slice before it handles messages again.
    pub slice_txns: u32,
    /// Longest a slice runs (ns of the transport's clock), checked after each transaction.
    pub slice_ns: u64,
    /// Seed of the nodes' load generators.
    pub seed: u64,
    /// Baselines: synchronous or asynchronous replication (STAR itself ignores it).
    pub replication: ReplicationSync,
    /// Baselines: transactions in flight per node, each on a worker of its own.
    pub virtual_workers: u32,
    /// Baselines: time between group commits (ns of the transport's clock).
    pub group_commit_ns: u64,
    /// Time between heartbeats (ns of the transport's clock, §7.1).
    pub heartbeat_ns: u64,
    /// Silence after which the coordinator declares a node failed (ns, §7.1).
    pub failure_timeout_ns: u64,
    /// This start of the node, different from its previous ones (a process uses the wall clock
    /// at start): how the others tell a restarted node that they have not declared failed yet
    /// from one they know (§7.2, see `recover`).
    pub incarnation: u64,
}

impl Default for StarSettings {
    fn default() -> Self {
        StarSettings {
            hybrid_replication: true,
            cross_partition: 0.0,
            local_load: false,
            slice_txns: 64,
            slice_ns: 200_000,
            seed: 1,
            replication: ReplicationSync::Async,
            virtual_workers: 16,
            group_commit_ns: 10_000_000,
            heartbeat_ns: 50_000_000,
            failure_timeout_ns: 1_000_000_000,
            incarnation: 0,
        }
    }
}

impl StarSettings {
    /// The settings a cluster file's `[star]` table gives (its share, its replication mode).
    pub fn from_config(star: &StarConfig) -> Self {
        StarSettings {
            hybrid_replication: star.hybrid_replication,
            cross_partition: star.cross_partition,
            replication: star.replication,
            virtual_workers: star.virtual_workers,
            group_commit_ns: (star.group_commit_ms * 1e6) as u64,
            heartbeat_ns: (star.heartbeat_ms * 1e6) as u64,
            failure_timeout_ns: (star.failure_timeout_ms * 1e6) as u64,
            ..StarSettings::default()
        }
    }
}

/// Opens node `me`'s database for `workload` under `layout`: STAR's protocol, the epoch moved only
/// by phase switches, every table created and the partitions `me` holds loaded (and the rows that
/// belong to no partition). `record_history` keeps every committed transaction for the checkers.
pub fn open_database<W: Procedures>(
    workload: &mut W,
    layout: &Layout,
    me: Addr,
    record_history: bool,
) -> Result<Database<Star>, LayoutError> {
    let db = open_empty_database(workload, layout, me, record_history)?;
    for p in layout.held(me) {
        workload.load_partition(&db, p);
    }
    Ok(db)
}

/// Opens node `me`'s database as [`open_database`] does, but with none of its partitions loaded
/// (only the rows that belong to no partition): the database of a node that restarts into a
/// running cluster, which copies its partitions from live replicas (§7.2, see `recover`).
pub fn open_empty_database<W: Procedures>(
    workload: &mut W,
    layout: &Layout,
    me: Addr,
    record_history: bool,
) -> Result<Database<Star>, LayoutError> {
    check_fit(workload, layout, me)?;
    let mut db = Database::<Star>::open(Config {
        record_history,
        epoch_interval: Duration::ZERO,
        ..Config::default()
    });
    workload.create_tables(&mut db);
    workload.load_shared(&db);
    Ok(db)
}

fn check_fit<W: Procedures>(workload: &W, layout: &Layout, me: Addr) -> Result<(), LayoutError> {
    if workload.partitions() != layout.partitions() {
        return Err(LayoutError(format!(
            "the workload {} has {} partitions, the layout {}",
            workload.name(),
            workload.partitions(),
            layout.partitions()
        )));
    }
    if me >= layout.nodes() {
        return Err(LayoutError(format!(
            "node {me} is not in a cluster of {} nodes",
            layout.nodes()
        )));
    }
    Ok(())
}

/// The digest of each partition `me` holds: every table's [`Database::digest`] over the
/// partition's rows, combined in table order. Equal on every replica once every write reached it.
pub(crate) fn partition_digests<W: Procedures>(
    db: &Database<Star>,
    workload: &W,
    layout: &Layout,
    me: Addr,
) -> Vec<PartitionDigest> {
    let tables = db.tables().len() as u32;
    layout
        .held(me)
        .into_iter()
        .map(|p| {
            let mut h = 0xcbf2_9ce4_8422_2325u64;
            for t in 0..tables {
                let d = db.digest(t, |key| workload.partition_of(t, key) == Some(p));
                h = (h ^ d).wrapping_mul(0x100_0000_01b3).rotate_left(29);
            }
            PartitionDigest {
                partition: p,
                digest: h,
            }
        })
        .collect()
}

/// Node `me`'s recorded history: its workers' `parts` and what the database kept (of dropped
/// workers), with ids made unique across nodes.
pub(crate) fn node_history(me: Addr, db: &Database<Star>, mut parts: Vec<History>) -> History {
    parts.push(db.take_history());
    let mut h = History::merge(parts);
    for t in &mut h.txns {
        t.id = ((me as u64 + 1) << 52) | (t.id & ((1 << 52) - 1));
    }
    h
}

/// Decodes a client's request body for `workload` and names the partitions it touches, or says
/// why it cannot run (too long, malformed, a workload that cannot place it).
pub(crate) fn decode_request<W>(workload: &W, body: &[u8]) -> Result<(W::Request, Touched), String>
where
    W: Procedures,
    W::Request: DeserializeOwned,
{
    if body.len() > MAX_REQUEST_BYTES {
        return Err(format!(
            "request of {} bytes exceeds {MAX_REQUEST_BYTES}",
            body.len()
        ));
    }
    let req: W::Request = postcard::from_bytes(body)
        .map_err(|e| format!("malformed request for workload {}: {e}", workload.name()))?;
    match catch_unwind(AssertUnwindSafe(|| workload.touched(&req))) {
        Ok(touched) => Ok((req, touched)),
        Err(_) => Err("the workload cannot tell which partitions the request touches".into()),
    }
}

/// A partition this node masters, with the one worker that runs it (§3: each partition is
/// mastered by a single worker).
pub(crate) struct Master<'db> {
    pub(crate) partition: PartitionId,
    pub(crate) worker: Worker<'db, Star>,
}

/// One STAR node. See the module doc.
pub struct StarNode<'db, W: Procedures> {
    pub(crate) me: Addr,
    pub(crate) layout: Layout,
    pub(crate) settings: StarSettings,
    pub(crate) db: &'db Database<Star>,
    pub(crate) workload: &'db W,
    pub(crate) masters: Vec<Master<'db>>,
    /// The partitions of `masters`, in their order (for routing).
    pub(crate) mastered: Vec<PartitionId>,
    /// The coordinator's worker for the single-master phase.
    pub(crate) sm_worker: Option<Worker<'db, Star>>,
    /// The worker of read-only requests at read committed (`read_committed`).
    pub(crate) rc_worker: Worker<'db, Star>,
    pub(crate) generator: W::Gen,
    /// State of the coordinator's choice of home partitions for cross-partition load.
    pub(crate) rng: u64,
    /// The master that runs first in the next round of a slice.
    pub(crate) next_master: usize,
    /// The current phase (0 before the first).
    pub(crate) phase: Phase,
    pub(crate) clock: PhaseClock,
    pub(crate) fence: Fence,
    pub(crate) coordinator: Option<Coordinator>,
    pub(crate) outbox: Outbox,
    pub(crate) inbox: Inbox,
    pub(crate) queues: Queues<W::Request>,
    /// What this node did in the current phase, for its end fence.
    pub(crate) report: PhaseReport,
    pub(crate) types: Vec<TypeCounts>,
    pub(crate) latency: Histogram<u64>,
    pub(crate) replication: ReplicationCounts,
    pub(crate) requests: RequestCounts,
    /// The requests this node forwarded that are not answered yet.
    pub(crate) forwarding: Forwarding,
    pub(crate) liveness: Liveness,
    pub(crate) recovery: Recovery,
    /// The Dist-OCC node this one runs as once no full replica is left (§7.2, `fallback`).
    pub(crate) fall_back: Option<FallBack<'db, W>>,
    /// Dist-OCC messages that came before this node switched (`fallback`).
    pub(crate) early: Vec<(Addr, StarMsg)>,
    /// Once the host asked for it ([`StarNode::hand_over_history`]): each phase's committed
    /// transactions, taken at its start fence, until the host takes them
    /// ([`StarNode::take_recorded`]).
    pub(crate) recorded: Vec<(Phase, History)>,
    /// Whether the host takes the history as it goes.
    pub(crate) hand_over: bool,
    /// Transactions taken from the workers so far: the next one's id (a worker numbers what it
    /// recorded since its history was last taken, so ids are renumbered per node).
    pub(crate) taken: u64,
}

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Node `me` of `layout`, over its database `db` (from [`open_database`]) and `workload`.
    pub fn new(
        me: Addr,
        layout: Layout,
        settings: StarSettings,
        db: &'db Database<Star>,
        workload: &'db W,
    ) -> Result<Self, LayoutError> {
        check_fit(workload, &layout, me)?;
        if !(0.0..=1.0).contains(&settings.cross_partition) {
            return Err(LayoutError(format!(
                "cross_partition must be between 0 and 1, not {}",
                settings.cross_partition
            )));
        }
        let coordinating = me == layout.coordinator();
        let masters: Vec<Master<'db>> = layout
            .mastered(me)
            .into_iter()
            .map(|partition| Master {
                partition,
                worker: db.worker(),
            })
            .collect();
        let coordinator = coordinating.then(|| {
            Coordinator::new(
                layout.nodes(),
                layout.iteration().as_nanos() as u64,
                settings.local_load.then_some(settings.cross_partition),
                db.config().record_history,
            )
        });
        Ok(StarNode {
            me,
            mastered: masters.iter().map(|m| m.partition).collect(),
            sm_worker: coordinating.then(|| db.worker()),
            rc_worker: db.worker(),
            generator: workload.generator(me as usize, settings.seed),
            rng: (settings.seed ^ 0x9e37_79b9_7f4a_7c15) | 1,
            next_master: 0,
            phase: 0,
            clock: PhaseClock::default(),
            fence: Fence::new(layout.nodes()),
            coordinator,
            outbox: Outbox::new(me, &layout),
            inbox: {
                let mut inbox = Inbox::new(layout.nodes());
                inbox.keep_before_images();
                inbox
            },
            liveness: Liveness::new(
                layout.nodes(),
                settings.heartbeat_ns,
                settings.failure_timeout_ns,
            ),
            recovery: Recovery::new(layout.nodes(), settings.incarnation),
            fall_back: None,
            early: Vec::new(),
            recorded: Vec::new(),
            hand_over: false,
            taken: 0,
            queues: Queues::new(masters.len()),
            report: PhaseReport::default(),
            types: workload
                .txn_types()
                .into_iter()
                .map(|name| TypeCounts {
                    name: name.to_string(),
                    ..TypeCounts::default()
                })
                .collect(),
            latency: latency_histogram(),
            replication: ReplicationCounts::default(),
            requests: RequestCounts::default(),
            forwarding: Forwarding::default(),
            masters,
            layout,
            settings,
            db,
            workload,
        })
    }

    /// This node's id.
    pub fn me(&self) -> Addr {
        self.me
    }

    /// The layout it runs under.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Its database.
    pub fn database(&self) -> &'db Database<Star> {
        self.db
    }

    /// The phase it is in (0 before the first begins); under the fall-back to Dist-OCC, the group
    /// after the last complete one (as [`StarStats::phase`]).
    pub fn phase(&self) -> Phase {
        match &self.fall_back {
            Some(f) => f.dist.completed_group() + 1,
            None => self.phase,
        }
    }

    /// Starts or stops the node's own load (the coordinator also stops planning for it).
    pub fn set_local_load(&mut self, on: bool) {
        self.settings.local_load = on;
        let share = on.then_some(self.settings.cross_partition);
        if let Some(c) = &mut self.coordinator {
            c.set_load_share(share);
        }
        if let Some(f) = &mut self.fall_back {
            f.dist.set_local_load(on);
        }
    }

    /// True when nothing is left to do here: no request waits, no result is held, no replication
    /// is unsent or held back.
    pub fn is_idle(&self) -> bool {
        self.queues.queued() == 0
            && self.queues.held.is_empty()
            && self.outbox.is_empty()
            && !self.inbox.has_held()
            && self.fall_back.as_ref().is_none_or(|f| f.dist.is_idle())
    }

    /// On the coordinator, when each phase's fence completed (phase 1 first), kept when the
    /// database records histories; empty elsewhere.
    pub fn phase_ends(&self) -> &[u64] {
        self.coordinator
            .as_ref()
            .map(Coordinator::phase_ends)
            .unwrap_or_default()
    }

    /// Every counter (under the fall-back to Dist-OCC, its groups' added, see `fallback`).
    pub fn stats(&self) -> StarStats {
        self.fall_back_stats(StarStats {
            idle: self.is_idle(),
            node: self.me,
            phase: self.phase,
            types: self.types.clone(),
            latency: LatencySnapshot::of(&self.latency),
            times: self.clock.times,
            replication: self.replication,
            requests: RequestCounts {
                queued: self.queues.queued() as u64,
                ..self.requests
            },
            recovery: self.recovery.stats,
            fall_back: None,
        })
    }

    /// A digest of each partition this node holds: every table's [`Database::digest`] over the
    /// partition's rows, combined in table order. Equal on every replica after a fence.
    pub fn digests(&self) -> Vec<PartitionDigest> {
        partition_digests(self.db, self.workload, &self.layout, self.me)
    }

    /// The committed transactions recorded since the last call (empty unless the database
    /// records), with ids made unique across nodes: those of phases whose fence took them and
    /// the host did not take ([`StarNode::take_recorded`]), and those run since.
    pub fn take_history(&mut self) -> History {
        let mut parts: Vec<History> = std::mem::take(&mut self.recorded)
            .into_iter()
            .map(|(_, h)| h)
            .collect();
        parts.push(self.take_executed());
        History::merge(parts)
    }

    /// What the workers (and the database, of dropped workers) recorded since the last call.
    fn take_executed(&mut self) -> History {
        let mut parts: Vec<History> = self
            .masters
            .iter_mut()
            .map(|m| m.worker.take_history())
            .collect();
        if let Some(w) = &mut self.sm_worker {
            parts.push(w.take_history());
        }
        parts.extend(self.fall_back_histories());
        let mut h = node_history(self.me, self.db, parts);
        for t in &mut h.txns {
            t.id = ((self.me as u64 + 1) << 52) | self.taken;
            self.taken += 1;
        }
        h
    }

    /// From now on (when its database records histories) the node hands its committed
    /// transactions over to [`StarNode::take_recorded`] as they become final; otherwise they stay
    /// with its workers until [`StarNode::take_history`].
    pub fn hand_over_history(&mut self) {
        self.hand_over = true;
    }

    /// The committed transactions this node handed over since the last call (after
    /// [`StarNode::hand_over_history`], when its database records histories): each STAR phase's, with the phase, as its start fence took them (before
    /// any message of the fence left, so before the phase can become irrevocable); under the
    /// fall-back to Dist-OCC, whatever committed since, with the current group. A host that keeps
    /// a history outside the process calls it after every event (`history_log`).
    pub fn take_recorded(&mut self) -> Vec<(Phase, History)> {
        if self.hand_over && self.fall_back.is_some() {
            let h = self.take_executed();
            if !h.is_empty() {
                self.recorded.push((self.phase(), h));
            }
        }
        std::mem::take(&mut self.recorded)
    }

    /// Whether the node executes transactions now: a phase has begun and its fence has not.
    pub(crate) fn executing(&self) -> bool {
        self.phase > 0
            && !self.fence.started()
            && self.liveness.lost.is_none()
            && self.layout.has_full_replica()
    }

    /// Phase `phase` begins here: the phase before it ended everywhere, so its results go out.
    fn begin<T: Transport<StarMsg>>(&mut self, net: &mut T, phase: Phase, length_ns: u64) {
        if phase <= self.phase || !self.may_enter(phase) {
            return;
        }
        self.release(net);
        self.phase = phase;
        self.inbox.forget_before(phase);
        self.rejoin_at_begin(net, phase);
        self.adopt_partitions();
        self.clock.begin(net.now(), length_ns);
        self.fence.reset(phase);
        self.report = PhaseReport::default();
        self.db.set_epoch(phase);
        self.db.set_star_mode(match PhaseKind::of(phase) {
            PhaseKind::Partitioned => StarMode::Partitioned,
            PhaseKind::SingleMaster => StarMode::SingleMaster,
        });
        if let Some(c) = &mut self.coordinator {
            c.on_begin(phase);
        }
        // Batches kept while the last full replica's failure was announced (`fallback`).
        self.replay_early_batches();
        // Batches that came before this node's first phase.
        self.inbox
            .retry_blocked(self.db, &mut self.replication, |_, _| {});
    }

    /// The coordinator begins `phase` everywhere.
    pub(crate) fn begin_everywhere<T: Transport<StarMsg>>(&mut self, net: &mut T, phase: Phase) {
        let queued_cross = self.queues.cross.len() as u64;
        let Some(c) = &self.coordinator else {
            return;
        };
        let length_ns = c.length_of(phase, queued_cross);
        for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
            net.send(n, StarMsg::Begin { phase, length_ns });
        }
        self.begin(net, phase, length_ns);
    }

    /// Start fence of `phase` (Figure 4): stop executing, send the replication buffers and tell
    /// every other node how far this node's batches to it go.
    pub(crate) fn start_fence<T: Transport<StarMsg>>(&mut self, net: &mut T, phase: Phase) {
        if phase > self.phase {
            // Its begin was overtaken by this message.
            self.begin(net, phase, 0);
        }
        if phase != self.phase || self.fence.started() {
            return;
        }
        self.fence.start();
        if self.hand_over && self.db.config().record_history {
            // The phase's transactions are final here unless this node fails in it: its host
            // writes them out before the fence's messages leave (`history_log`).
            let h = self.take_executed();
            if !h.is_empty() {
                self.recorded.push((phase, h));
            }
        }
        self.clock.fence(net.now(), PhaseKind::of(phase));
        self.outbox.flush(net, phase, &mut self.replication);
        for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
            net.send(
                n,
                StarMsg::Sent {
                    phase,
                    through: self.outbox.sent_through(n),
                },
            );
        }
        self.try_end_fence(net);
    }

    /// Sends end fence once every batch sent to this node in the phase is applied.
    pub(crate) fn try_end_fence<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if !self.fence.try_end(self.me, &self.inbox) {
            return;
        }
        self.report.queued_single = self.queues.queued_single() as u64;
        let (phase, report, view) = (self.phase, self.report, self.liveness.view);
        let coordinator = self.layout.coordinator();
        if coordinator == self.me {
            self.on_end_fence(net, phase, self.me, report);
        } else {
            net.send(
                coordinator,
                StarMsg::EndFence {
                    phase,
                    view,
                    report,
                },
            );
        }
    }

    /// On the coordinator: node `from` ended the fence of `phase`; once all have, the next phase
    /// begins.
    fn on_end_fence<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        phase: Phase,
        from: Addr,
        report: PhaseReport,
    ) {
        let exec_ns = self.clock.last_exec_ns();
        let now = net.now();
        let Some(c) = &mut self.coordinator else {
            return;
        };
        if !c.on_end_fence(phase, from, report, exec_ns, now) {
            return;
        }
        if !self.layout.has_full_replica() {
            // No full replica is left: Dist-OCC from the next phase on (`fallback`).
            self.announce_fall_back(net, phase + 1);
        } else if self.may_begin(phase + 1) {
            self.begin_everywhere(net, phase + 1);
        }
    }

    /// A partitioned phase's length is known to every node from its begin, so each node starts its
    /// own fence when the phase is due, without waiting for the coordinator's start fence: a
    /// coordinator that runs nothing in the phase sleeps between ticks and would end it late, and
    /// its start fence would add a hop to every fence.
    fn fence_when_due<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if self.coordinator.is_none()
            && self.executing()
            && PhaseKind::of(self.phase) == PhaseKind::Partitioned
            && self.clock.due(net.now())
        {
            self.start_fence(net, self.phase);
        }
    }

    /// On the coordinator: ends the phase when it is due (or a single-master phase ran out of
    /// work, or another node fenced a partitioned phase that came due there), or begins the
    /// first phase. Elsewhere: fences a partitioned phase that is due.
    fn drive_phases<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if self.coordinator.is_none() {
            return self.fence_when_due(net);
        }
        if self.falling_back() {
            return self.fence_for_fall_back(net);
        }
        if self.phase == 0 && self.all_said_hello() {
            self.begin_everywhere(net, 1);
        }
        if !self.executing() {
            return;
        }
        let kind = PhaseKind::of(self.phase);
        let cross_work = self.has_cross_work();
        let due = self.clock.due(net.now())
            || (kind == PhaseKind::Partitioned && self.fence.heard_from_any(self.me));
        let end = self
            .coordinator
            .as_mut()
            .is_some_and(|c| c.should_end(kind, due, cross_work));
        if end {
            let phase = self.phase;
            for n in (0..self.layout.nodes()).filter(|&n| n != self.me) {
                net.send(n, StarMsg::StartFence { phase });
            }
            self.start_fence(net, phase);
        }
    }

    /// Takes a request from a client (`origin` a client) or a forwarding node (`origin` via it).
    fn on_request<T: Transport<StarMsg>>(&mut self, net: &mut T, origin: Origin, body: Vec<u8>) {
        let (req, touched) = match decode_request(self.workload, &body) {
            Ok(decoded) => decoded,
            Err(text) => return self.reply_error(net, origin, text),
        };
        let route = route(&self.layout, self.me, &self.mastered, &touched);
        if matches!(route, Route::Here(_) | Route::Cross) && self.queues.queued() >= MAX_QUEUED {
            let text = format!("node {} has {MAX_QUEUED} requests waiting", self.me);
            return self.reply_error(net, origin, text);
        }
        let pending = Pending {
            origin,
            req,
            since: net.now(),
        };
        match route {
            Route::Refuse(text) => self.reply_error(net, origin, text),
            Route::Forward(to) => match origin {
                Origin::Client { addr, rid } => {
                    self.requests.forwarded += 1;
                    self.forwarding.sent(addr, rid, to);
                    net.send(
                        to,
                        StarMsg::Forward {
                            client: addr,
                            rid,
                            body,
                        },
                    );
                }
                _ => {
                    let text = format!(
                        "node {} neither runs this request nor is it the node to route it (it runs on node {to})",
                        self.me
                    );
                    self.reply_error(net, origin, text);
                }
            },
            Route::Here(i) => {
                self.report.arrived_single += 1;
                self.queues.single[i].push_back(pending);
            }
            Route::Cross => {
                if let Some(c) = &mut self.coordinator {
                    c.on_cross_arrival();
                }
                self.queues.cross.push_back(pending);
            }
        }
    }

    /// Answers `origin` with an error at once (nothing ran, so nothing waits for a fence).
    pub(crate) fn reply_error<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        origin: Origin,
        text: String,
    ) {
        self.requests.errors += 1;
        answer(net, origin, Outcome::error(text));
    }

    /// Releases the results of the phase that just ended everywhere (§4, §7.1): replies go out,
    /// and committed transactions are counted, with their latency.
    pub(crate) fn release<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        let phase = self.phase;
        let mut held_list = std::mem::take(&mut self.queues.held);
        for held in held_list.drain(..) {
            held.release(net, phase, &mut self.types, &mut self.latency);
        }
        self.queues.held = held_list;
    }

    fn answer(&mut self, query: Query) -> Answer {
        match query {
            Query::Stats => Answer::Stats(Box::new(self.stats())),
            Query::Digests => Answer::Digests(self.digests()),
            Query::History => Answer::History(self.take_history()),
            Query::Load(on) => {
                self.set_local_load(on);
                Answer::Stats(Box::new(self.stats()))
            }
            Query::Check => Answer::Check(self.check()),
            Query::Rows {
                table,
                first,
                count,
            } => Answer::Rows(read_rows(self.db, table, first, count)),
        }
    }
}

impl<'db, W> Node for StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    type Msg = StarMsg;

    fn on_start<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        self.say_hello(net);
    }

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        let from_node = from < self.layout.nodes();
        // A restarted node is still failed here until it rejoins (`recover`).
        match msg {
            // Under the fall-back (or on the way to it) a restarted node is not let back in.
            StarMsg::Hello { incarnation } if from_node && !self.falling_back() => {
                return self.on_hello(net, from, incarnation);
            }
            StarMsg::CopyRequest { partition } if from_node && self.fall_back.is_none() => {
                return self.on_copy_request(from, partition);
            }
            _ => {}
        }
        if from_node {
            if self.layout.is_failed(from) {
                // Fail-stop (§7.1): what a failed node still had in flight is ignored.
                return;
            }
            self.liveness.heard(from, net.now());
        }
        if self.fall_back.is_some() {
            return self.on_fall_back_message(net, from, msg);
        }
        let Some(msg) = self.keep_early(from, msg) else {
            return;
        };
        let phase = self.phase;
        match msg {
            StarMsg::Begin { phase, length_ns } if self.controls(from) => {
                self.begin(net, phase, length_ns)
            }
            StarMsg::StartFence { phase } if self.controls(from) => self.start_fence(net, phase),
            StarMsg::Sent { phase, through } if from_node => {
                self.fence.on_sent(phase, from, through);
                self.try_end_fence(net);
            }
            StarMsg::EndFence {
                phase,
                view,
                report,
            } if from_node && view == self.liveness.view => {
                self.on_end_fence(net, phase, from, report)
            }
            StarMsg::Replicate {
                phase: batch_phase,
                seq,
                bytes,
            } if from_node => {
                if self.phase == 0 {
                    // Not a member yet: applied once it begins its first phase (a restarted
                    // node drops what was sent to its previous incarnation first).
                    self.inbox.hold(from, seq, batch_phase, bytes);
                } else {
                    self.inbox.receive_of(
                        self.db,
                        from,
                        seq,
                        batch_phase,
                        bytes,
                        &mut self.replication,
                    );
                    self.try_end_fence(net);
                }
            }
            StarMsg::Failed { node, phase, view } if self.controls(from) => {
                self.on_failed(net, node, phase, view)
            }
            StarMsg::FallBack { phase, view } if self.controls(from) => {
                self.switch_to_dist(net, phase, view)
            }
            StarMsg::Rejoin {
                node,
                phase,
                view,
                layout,
            } if self.controls(from) || node == self.me => {
                self.on_rejoin(net, node, phase, view, *layout)
            }
            StarMsg::RejoinAck { node } if from_node => self.on_rejoin_ack(net, from, node),
            StarMsg::CopyChunk {
                partition,
                seq,
                last,
                bytes,
            } if from_node => self.on_copy_chunk(net, from, partition, seq, last, &bytes),
            StarMsg::Recovered { node } if from_node => self.on_recovered(net, from, node),
            StarMsg::Request { rid, body } => {
                self.requests.received += 1;
                self.on_request(net, Origin::Client { addr: from, rid }, body);
            }
            StarMsg::ReadCommitted { rid, body } => {
                self.requests.received += 1;
                self.read_committed(net, from, rid, &body);
            }
            StarMsg::Forward { client, rid, body } if from_node => {
                self.on_request(
                    net,
                    Origin::Via {
                        via: from,
                        client,
                        rid,
                    },
                    body,
                );
            }
            StarMsg::Forwarded {
                client,
                rid,
                outcome,
            } if from_node => {
                self.forwarding.answered(client, rid);
                net.send(client, StarMsg::Reply { rid, outcome });
            }
            StarMsg::Query { rid, query } => {
                let answer = self.answer(query);
                net.send(from, StarMsg::Answer { rid, answer });
            }
            // Replies and answers are for clients; control messages from outside the cluster
            // (or phase control not from the coordinator) are ignored.
            _ => {}
        }
        if self.phase != phase {
            // A phase began: its work starts at once, not at the next tick.
            self.run_slice(net);
        }
        self.drive_phases(net);
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        if let Some(f) = &mut self.fall_back {
            return f.dist.on_tick(net);
        }
        self.watch(net);
        let mut advanced = false;
        if self.phase > 0 {
            self.inbox
                .retry_blocked(self.db, &mut self.replication, |_, _| advanced = true);
        }
        if advanced {
            self.try_end_fence(net);
        }
        self.drive_phases(net);
        self.run_slice(net);
        self.copy_out(net);
        self.drive_phases(net);
    }

    fn busy(&self) -> bool {
        if let Some(f) = &self.fall_back {
            return f.dist.busy();
        }
        (self.executing() && self.has_work()) || self.recovery.copying_out()
    }
}
