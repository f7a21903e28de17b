//! The replication fence between phases (STAR §4.3, Figure 4).
//!
//! The coordinator ends a phase by sending *start fence* to every node (itself included). A
//! partitioned phase's length comes with its begin, so every node also starts its fence by itself
//! when that phase is due, and the coordinator ends the phase as soon as another node has (an idle
//! coordinator would otherwise end it late, at its next tick). A node that starts its fence stops
//! executing, sends what its replication buffers hold, and tells every other
//! node how many replication batches it has sent it so far ([`StarMsg::Sent`]); the paper's nodes
//! exchange counts of committed writes the same way. A node that has heard from every other node
//! waits until it has applied every batch they sent it, then sends *end fence* to the coordinator.
//! Once every node has, every write of the phase is on every replica of its partition, and the
//! coordinator begins the next phase. Batches are counted by their stream numbers, which run on
//! across phases (see [`crate::star::replicate`]), so "applied everything sent" is "applied up to
//! the last number sent".
//!
//! Messages of neighbouring phases may overtake each other; the fence keeps counts that arrive for
//! the next phase before this node has begun it, and a start fence for a phase not yet begun
//! begins it first (its begin message was overtaken).

use phasedb_net::Addr;

use crate::star::msg::{Phase, PhaseReport};
use crate::star::replicate::Inbox;

/// One node's side of the fence of its current phase.
pub(crate) struct Fence {
    phase: Phase,
    started: bool,
    ended: bool,
    /// Per node, the last batch number it says it sent this node.
    through: Vec<Option<u64>>,
    /// Counts that arrived for a later phase: (phase, sender, last batch number).
    early: Vec<(Phase, Addr, u64)>,
    /// Per node, whether it failed (the fence no longer waits for it, §7.1).
    failed: Vec<bool>,
}

impl Fence {
    /// No fence yet, in a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32) -> Fence {
        Fence {
            phase: 0,
            started: false,
            ended: false,
            through: vec![None; nodes as usize],
            early: Vec::new(),
            failed: vec![false; nodes as usize],
        }
    }

    /// Phase `phase` begins: its fence has not started; counts that came early are taken in.
    pub(crate) fn reset(&mut self, phase: Phase) {
        self.phase = phase;
        self.started = false;
        self.ended = false;
        self.through.fill(None);
        let through = &mut self.through;
        self.early.retain(|&(p, from, t)| {
            if p == phase {
                through[from as usize] = Some(t);
            }
            p > phase
        });
    }

    /// Node `node` failed: the fence stops waiting for it, and one this node already ended is
    /// ended again (its end fence must follow the failure's taking back of writes).
    pub(crate) fn on_failure(&mut self, node: Addr) {
        if let Some(f) = self.failed.get_mut(node as usize) {
            *f = true;
        }
        self.ended = false;
    }

    /// Restarted node `node` is a member again: the fence waits for it.
    pub(crate) fn on_rejoin(&mut self, node: Addr) {
        if let Some(f) = self.failed.get_mut(node as usize) {
            *f = false;
        }
    }

    /// The start fence of the current phase arrived.
    pub(crate) fn start(&mut self) {
        self.started = true;
    }

    /// Whether the current phase's fence has started (the node no longer executes).
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// Whether another node has already said what it sent in the current phase (it fenced it).
    pub(crate) fn heard_from_any(&self, me: Addr) -> bool {
        self.through
            .iter()
            .enumerate()
            .any(|(n, t)| n as Addr != me && t.is_some())
    }

    /// Node `from` sent this node batches up to `through` by the fence of `phase`.
    pub(crate) fn on_sent(&mut self, phase: Phase, from: Addr, through: u64) {
        if from as usize >= self.through.len() {
            return;
        }
        if phase == self.phase {
            self.through[from as usize] = Some(through);
        } else if phase > self.phase {
            self.early.push((phase, from, through));
        }
    }

    /// True once, when the fence has started, every other node has said what it sent, and all of
    /// it is applied: the node then sends end fence.
    pub(crate) fn try_end(&mut self, me: Addr, inbox: &Inbox) -> bool {
        if !self.started || self.ended {
            return false;
        }
        let caught_up = self.through.iter().enumerate().all(|(n, t)| {
            n as Addr == me
                || self.failed[n]
                || t.is_some_and(|t| inbox.applied_through(n as Addr) >= t)
        });
        self.ended = caught_up;
        caught_up
    }
}

/// The coordinator's collection of end fences for its current phase.
pub(crate) struct EndFences {
    phase: Phase,
    reports: Vec<Option<PhaseReport>>,
    failed: Vec<bool>,
}

impl EndFences {
    /// None collected, in a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32) -> EndFences {
        EndFences {
            phase: 0,
            reports: vec![None; nodes as usize],
            failed: vec![false; nodes as usize],
        }
    }

    /// Node `node` failed: no end fence is awaited from it, and those collected so far are
    /// dropped (each live node ends the fence again once it took back the failed node's writes).
    pub(crate) fn on_failure(&mut self, node: Addr) {
        if let Some(f) = self.failed.get_mut(node as usize) {
            *f = true;
        }
        self.reports.fill(None);
    }

    /// Restarted node `node` is a member again: its end fences are awaited.
    pub(crate) fn on_rejoin(&mut self, node: Addr) {
        if let Some(f) = self.failed.get_mut(node as usize) {
            *f = false;
        }
    }

    /// Starts collecting for `phase`.
    pub(crate) fn reset(&mut self, phase: Phase) {
        self.phase = phase;
        self.reports.fill(None);
    }

    /// Node `from` ended the fence of `phase`; returns every node's report once all have.
    pub(crate) fn on_end(
        &mut self,
        phase: Phase,
        from: Addr,
        report: PhaseReport,
    ) -> Option<PhaseReport> {
        if phase != self.phase || from as usize >= self.reports.len() {
            return None;
        }
        self.reports[from as usize] = Some(report);
        if self
            .reports
            .iter()
            .zip(&self.failed)
            .any(|(r, &failed)| r.is_none() && !failed)
        {
            return None;
        }
        let mut sum = PhaseReport::default();
        for r in self.reports.iter().flatten() {
            sum.ran += r.ran;
            sum.generated += r.generated;
            sum.arrived_single += r.arrived_single;
            sum.queued_single += r.queued_single;
        }
        self.reports.fill(None);
        self.phase = 0;
        Some(sum)
    }
}
