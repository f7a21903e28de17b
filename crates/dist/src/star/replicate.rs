//! The replication streams (STAR §5): what a node's committed transactions wrote goes to the other
//! replicas of each written record's partition, and what others send is applied here.
//!
//! - **Outbox**: after each commit the worker appends the transaction's records
//!   (`Worker::write_replication`) to the buffer of the written partition's *replica group* — the
//!   set of the partition's other holders, shared by partitions with the same holders. A buffer
//!   leaves as one [`StarMsg::Replicate`] batch to each node of its group when the node's slice of
//!   work ends, when it passes [`FLUSH_BYTES`], and at the start fence. Under TCP each copy is
//!   encoded from the same buffer, which is then reused, so steady replication allocates nothing.
//! - **Operation or value replication** (§5.2): the mode is chosen per phase by the node; in the
//!   partitioned phase a partition's records come from its one primary, so operation records
//!   (only the columns written) applied in stream order are enough; in the single-master phase
//!   the coordinator sends whole column groups, applied with the Thomas write rule.
//! - **Stream order**: batches are numbered per sender and receiver, and the receiver applies them
//!   in that order whatever order the network delivers them in (the simulator reorders), holding
//!   early ones back. Numbers run on across phases, so the replication fence can compare "the last
//!   batch you sent me" with "the last batch I applied" ([`crate::star::fence`]).

use std::collections::BTreeMap;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{
    Applied, BeforeImages, Database, Procedures, ReplicationError, ReplicationMode, Star, Worker,
};

use crate::star::layout::Layout;
use crate::star::msg::{Phase, PhaseKind, StarMsg};
use crate::star::stats::ReplicationCounts;

/// A replica group's buffer is sent once it holds this many bytes (frames are bounded at 16 MiB).
pub const FLUSH_BYTES: usize = 1 << 20;

/// Replication leaving this node: one buffer per replica group, and the stream numbers.
pub(crate) struct Outbox {
    /// Per partition, the replica group its records go to (`None`: no other node holds it).
    group_of: Vec<Option<usize>>,
    /// Per group, the nodes its batches go to.
    dests: Vec<Vec<Addr>>,
    /// Per group, the records not sent yet.
    bufs: Vec<Vec<u8>>,
    /// Per node, the number of the last batch sent to it.
    sent: Vec<u64>,
}

impl Outbox {
    /// The outbox of node `me`: groups from the layout's holders of each partition but `me`.
    pub(crate) fn new(me: Addr, layout: &Layout) -> Outbox {
        Outbox::with_dests(me, layout, false)
    }

    /// The outbox of node `me` under Dist-OCC/Dist-S2PL: a partition another node masters is
    /// replicated to its holders but that primary, which installs the writes at the decision.
    pub(crate) fn without_primaries(me: Addr, layout: &Layout) -> Outbox {
        Outbox::with_dests(me, layout, true)
    }

    fn with_dests(me: Addr, layout: &Layout, skip_primaries: bool) -> Outbox {
        let mut dests: Vec<Vec<Addr>> = Vec::new();
        let group_of = (0..layout.partitions())
            .map(|p| {
                let skip = if skip_primaries {
                    layout.primary(p)
                } else {
                    me
                };
                let others: Vec<Addr> = layout
                    .replicas(p)
                    .iter()
                    .copied()
                    .filter(|&n| n != me && n != skip)
                    .collect();
                if others.is_empty() {
                    return None;
                }
                Some(match dests.iter().position(|d| *d == others) {
                    Some(g) => g,
                    None => {
                        dests.push(others);
                        dests.len() - 1
                    }
                })
            })
            .collect();
        Outbox {
            group_of,
            bufs: vec![Vec::new(); dests.len()],
            dests,
            sent: vec![0; layout.nodes() as usize],
        }
    }

    /// Appends the records of the transaction `worker` just committed in a phase of kind `kind`;
    /// counts them and their bytes.
    pub(crate) fn write<W: Procedures>(
        &mut self,
        worker: &mut Worker<'_, Star>,
        workload: &W,
        mode: ReplicationMode,
        kind: PhaseKind,
        counts: &mut ReplicationCounts,
    ) {
        let before: usize = self.bufs.iter().map(Vec::len).sum();
        let group_of = &self.group_of;
        let records = worker.write_replication(mode, &mut self.bufs, |table, key| {
            workload
                .partition_of(table, key)
                .and_then(|p| group_of.get(p as usize).copied().flatten())
        });
        let after: usize = self.bufs.iter().map(Vec::len).sum();
        counts.records += records as u64;
        let bytes = (after - before) as u64;
        match kind {
            PhaseKind::Partitioned => counts.bytes_partitioned += bytes,
            PhaseKind::SingleMaster => counts.bytes_single_master += bytes,
        }
    }

    /// Sends every buffer that passed [`FLUSH_BYTES`].
    pub(crate) fn flush_full<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        phase: Phase,
        counts: &mut ReplicationCounts,
    ) {
        for g in 0..self.bufs.len() {
            if self.bufs[g].len() >= FLUSH_BYTES {
                self.send_group(net, phase, g, counts);
            }
        }
    }

    /// Sends every buffer that holds records.
    pub(crate) fn flush<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        phase: Phase,
        counts: &mut ReplicationCounts,
    ) {
        for g in 0..self.bufs.len() {
            if !self.bufs[g].is_empty() {
                self.send_group(net, phase, g, counts);
            }
        }
    }

    fn send_group<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        phase: Phase,
        g: usize,
        counts: &mut ReplicationCounts,
    ) {
        let mut msg = StarMsg::Replicate {
            phase,
            seq: 0,
            bytes: std::mem::take(&mut self.bufs[g]),
        };
        for &to in &self.dests[g] {
            self.sent[to as usize] += 1;
            if let StarMsg::Replicate { seq, bytes, .. } = &mut msg {
                *seq = self.sent[to as usize];
                counts.batches_sent += 1;
                counts.bytes_sent += bytes.len() as u64;
            }
            net.send_copy(to, &msg);
        }
        if let StarMsg::Replicate { mut bytes, .. } = msg {
            bytes.clear();
            self.bufs[g] = bytes;
        }
    }

    /// Regroups the destinations after a node failed (`layout` no longer lists it): sends what the
    /// buffers hold first, so each record still goes where it was meant to; keeps the numbering.
    pub(crate) fn regroup<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        me: Addr,
        layout: &Layout,
        phase: Phase,
        counts: &mut ReplicationCounts,
    ) {
        self.flush(net, phase, counts);
        let sent = std::mem::take(&mut self.sent);
        *self = Outbox::new(me, layout);
        self.sent = sent;
    }

    /// Restarted node `node` holds its partitions again (`layout` lists it): regroups as
    /// [`Outbox::regroup`] does, and numbers batches to `node` from 1 again, as its inbox is new.
    pub(crate) fn rejoin<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        me: Addr,
        node: Addr,
        layout: &Layout,
        phase: Phase,
        counts: &mut ReplicationCounts,
    ) {
        self.regroup(net, me, layout, phase, counts);
        self.sent[node as usize] = 0;
    }

    /// The number of the last batch sent to `to` (0: none).
    pub(crate) fn sent_through(&self, to: Addr) -> u64 {
        self.sent[to as usize]
    }

    /// Whether every buffer is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.bufs.iter().all(Vec::is_empty)
    }
}

/// Replication arriving at this node: applied in each sender's order.
pub(crate) struct Inbox {
    /// Per node, the number of the last batch applied from it.
    applied: Vec<u64>,
    /// Batches that arrived ahead of one still missing, by sender and number, with their phase.
    early: BTreeMap<(Addr, u64), (Phase, Vec<u8>)>,
    /// With fault tolerance on (STAR §7.2): what the applied batches changed, as it was before
    /// them, one [`BeforeImages`] per sender and phase, in the order their first batches arrived.
    undo: Option<Undo>,
}

/// The before-images an [`Inbox`] keeps, and cleared ones to reuse (their buffers grown to a
/// phase's size already), so steady replication captures without allocating.
#[derive(Default)]
struct Undo {
    kept: Vec<(Addr, Phase, BeforeImages)>,
    spare: Vec<BeforeImages>,
}

impl Undo {
    /// Cleared images kept for reuse at most: one per sender and phase of a few phases is plenty.
    const SPARE: usize = 8;

    /// The images of `from`'s batches of `phase`, new if none are kept.
    fn images(&mut self, from: Addr, phase: Phase) -> &mut BeforeImages {
        let at = match self
            .kept
            .iter()
            .rposition(|(sender, p, _)| *sender == from && *p == phase)
        {
            Some(at) => at,
            None => {
                let images = self.spare.pop().unwrap_or_default();
                self.kept.push((from, phase, images));
                self.kept.len() - 1
            }
        };
        &mut self.kept[at].2
    }

    /// Drops the images `drop` selects, keeping their buffers for reuse.
    fn drop_where(&mut self, mut drop: impl FnMut(Addr, Phase) -> bool) {
        for (_, _, mut images) in self.kept.extract_if(.., |(s, p, _)| drop(*s, *p)) {
            if self.spare.len() < Self::SPARE {
                images.clear();
                self.spare.push(images);
            }
        }
    }
}

impl Inbox {
    /// An inbox for a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32) -> Inbox {
        Inbox {
            applied: vec![0; nodes as usize],
            early: BTreeMap::new(),
            undo: None,
        }
    }

    /// Keeps the rows each batch changes, as they were before it, so a failed sender's batches
    /// of an unfinished phase can be taken back ([`Inbox::take_back`]).
    pub(crate) fn keep_before_images(&mut self) {
        self.undo.get_or_insert_with(Undo::default);
    }

    /// Phase `phase` begins: earlier phases ended everywhere, so their batches stay for good.
    pub(crate) fn forget_before(&mut self, phase: Phase) {
        if let Some(undo) = &mut self.undo {
            undo.drop_where(|_, p| p < phase);
        }
    }

    /// Node `from` failed in phase `phase`: puts back every row its batches of that phase (or
    /// later) changed here, newest first, and drops its batches not applied yet. Returns the rows
    /// put back.
    pub(crate) fn take_back(&mut self, db: &Database<Star>, from: Addr, phase: Phase) -> usize {
        self.early.retain(|&(sender, _), _| sender != from);
        let Some(undo) = &mut self.undo else {
            return 0;
        };
        let mut restored = 0;
        for (sender, p, images) in undo.kept.iter().rev() {
            if *sender == from && *p >= phase {
                restored += db.restore(images);
            }
        }
        undo.drop_where(|sender, p| sender == from && p >= phase);
        restored
    }

    /// Restarted node `node` numbers its batches from 1 again: forgets its old stream.
    pub(crate) fn rejoin(&mut self, node: Addr) {
        self.applied[node as usize] = 0;
        self.early.retain(|&(sender, _), _| sender != node);
        if let Some(undo) = &mut self.undo {
            undo.drop_where(|sender, _| sender == node);
        }
    }

    /// On a restarted node joining at `phase`: drops batches held from before it (sent to the
    /// node's previous incarnation, under old numbers).
    pub(crate) fn purge_before(&mut self, phase: Phase) {
        self.early.retain(|_, (p, _)| *p >= phase);
    }

    /// Takes batch `seq` from `from`: applies it and any held batches that follow it if it is the
    /// next one, else holds it. A batch from outside the cluster or already applied is ignored.
    pub(crate) fn receive(
        &mut self,
        db: &Database<Star>,
        from: Addr,
        seq: u64,
        bytes: Vec<u8>,
        counts: &mut ReplicationCounts,
    ) {
        self.receive_of(db, from, seq, 0, bytes, counts);
    }

    /// [`Inbox::receive`] of a batch of phase `phase` (kept with its before-images).
    pub(crate) fn receive_of(
        &mut self,
        db: &Database<Star>,
        from: Addr,
        seq: u64,
        phase: Phase,
        bytes: Vec<u8>,
        counts: &mut ReplicationCounts,
    ) {
        if self.hold(from, seq, phase, bytes) {
            self.drain(db, from, counts);
        }
    }

    /// Keeps batch `seq` of phase `phase` from `from` without applying anything (a node not yet
    /// a member: [`Inbox::retry_blocked`] applies it later); false if it is from outside the
    /// cluster or already applied.
    pub(crate) fn hold(&mut self, from: Addr, seq: u64, phase: Phase, bytes: Vec<u8>) -> bool {
        let Some(&done) = self.applied.get(from as usize) else {
            return false;
        };
        if seq <= done {
            return false;
        }
        self.early.insert((from, seq), (phase, bytes));
        true
    }

    /// Applies `from`'s batches that are next in its order, stopping at one a held lock blocked
    /// (kept to apply again; the Thomas write rule skips what it applied). A batch only counts as
    /// applied once every record of it landed, so a replication fence waits for it.
    fn drain(&mut self, db: &Database<Star>, from: Addr, counts: &mut ReplicationCounts) {
        let mut next = self.applied[from as usize];
        while let Some((phase, bytes)) = self.early.get(&(from, next + 1)) {
            let applied = match &mut self.undo {
                Some(undo) => db.apply_replication_keeping(bytes, undo.images(from, *phase)),
                None => db.apply_replication(bytes),
            };
            if !counted(applied, counts) {
                counts.blocked += 1;
                break;
            }
            self.early.remove(&(from, next + 1));
            next += 1;
        }
        self.applied[from as usize] = next;
    }

    /// Applies again every batch a held lock blocked: called by a node once its own transactions
    /// may have let go of their locks (on every tick).
    /// Calls `advanced(sender, through)` for each sender whose applied batches moved on.
    pub(crate) fn retry_blocked(
        &mut self,
        db: &Database<Star>,
        counts: &mut ReplicationCounts,
        mut advanced: impl FnMut(Addr, u64),
    ) {
        if self.early.is_empty() {
            return;
        }
        for from in 0..self.applied.len() as Addr {
            let before = self.applied[from as usize];
            if self.early.contains_key(&(from, before + 1)) {
                self.drain(db, from, counts);
                let through = self.applied[from as usize];
                if through > before {
                    advanced(from, through);
                }
            }
        }
    }

    /// The number of the last batch applied from `from`.
    pub(crate) fn applied_through(&self, from: Addr) -> u64 {
        self.applied.get(from as usize).copied().unwrap_or(0)
    }

    /// Whether batches are held back waiting for an earlier one.
    pub(crate) fn has_held(&self) -> bool {
        !self.early.is_empty()
    }
}

/// Counts what applying one batch did; false if a record of it met a held lock (nothing is
/// counted then).
fn counted(applied: Result<Applied, ReplicationError>, counts: &mut ReplicationCounts) -> bool {
    match applied {
        Ok(applied) if applied.blocked > 0 => return false,
        Ok(applied) => counts.records_applied += applied.records as u64,
        Err(_) => counts.refused += 1,
    }
    counts.batches_applied += 1;
    true
}
