//! Phase switching and timing (STAR §4.3): when the coordinator ends a phase, how long the next
//! one lasts, and how long every node spends in each kind of phase and in fences.
//!
//! **Splitting the iteration.** An iteration (10 ms by default) is one partitioned phase and one
//! single-master phase; the paper sets their lengths "dynamically according to the ratio of
//! cross-partition transactions". Here the single-master phase gets the share
//!
//! ```text
//!   s = (C / r_sm) / (C / r_sm + P / r_p)
//! ```
//!
//! of the iteration, where `C` and `P` are the cross-partition and single-partition work in
//! transactions and `r_sm`, `r_p` the rates (transactions per ns) the last single-master and
//! partitioned phases ran at, cluster-wide: the time the cross-partition work needs over the time
//! all of it needs. With the nodes' own load `C : P` is the configured share `x : 1 - x`; with
//! client requests it is the requests that arrived in the last two phases plus those waiting.
//! Rates not measured yet (no transaction ran in that kind of phase) count as equal. With no
//! cross-partition work `s = 0` and the single-master phase is a bare fence; with no
//! single-partition work `s = 1`; with both, `s` is kept within [`MIN_SHARE`] of either end.
//!
//! **Ending a phase.** A partitioned phase ends when its length has passed. A single-master phase
//! ends then too, or earlier once the coordinator has no cross-partition work left: no request
//! waits and its own load has used its quota. The quota keeps the generated share exact on
//! average: the coordinator generates cross-partition requests until they are `x / (1 - x)` times
//! the single-partition requests the nodes generated so far (counted at the fences), so a phase
//! cut short by its length leaves the rest to the next one.

use phasedb_net::Addr;

use crate::star::fence::EndFences;
use crate::star::msg::{Phase, PhaseKind, PhaseReport};
use crate::star::stats::PhaseTimes;

/// Smallest share of an iteration either phase gets while both kinds of work exist.
pub const MIN_SHARE: f64 = 0.05;

/// How long one node spends in each phase kind and in fences.
#[derive(Default)]
pub(crate) struct PhaseClock {
    begun_at: u64,
    fenced_at: Option<u64>,
    length_ns: u64,
    last_exec_ns: u64,
    pub(crate) times: PhaseTimes,
}

impl PhaseClock {
    /// A phase begins at `now`, planned for `length_ns`.
    pub(crate) fn begin(&mut self, now: u64, length_ns: u64) {
        if let Some(f) = self.fenced_at.take() {
            self.times.fence_ns += now.saturating_sub(f);
        }
        self.begun_at = now;
        self.length_ns = length_ns;
        self.times.phases += 1;
    }

    /// The phase of kind `kind` stops executing at `now`.
    pub(crate) fn fence(&mut self, now: u64, kind: PhaseKind) {
        let ran = now.saturating_sub(self.begun_at);
        self.last_exec_ns = ran;
        match kind {
            PhaseKind::Partitioned => self.times.partitioned_ns += ran,
            PhaseKind::SingleMaster => self.times.single_master_ns += ran,
        }
        self.fenced_at = Some(now);
    }

    /// Whether the phase's planned length has passed at `now`.
    pub(crate) fn due(&self, now: u64) -> bool {
        now.saturating_sub(self.begun_at) >= self.length_ns
    }

    /// How long the last phase executed, from its begin to its start fence.
    pub(crate) fn last_exec_ns(&self) -> u64 {
        self.last_exec_ns
    }
}

/// A rate measured over one phase: transactions run and the time it executed.
#[derive(Clone, Copy, Debug, Default)]
struct Rate {
    ran: u64,
    ns: u64,
}

impl Rate {
    fn per_ns(self) -> Option<f64> {
        (self.ran > 0 && self.ns > 0).then(|| self.ran as f64 / self.ns as f64)
    }
}

/// The coordinator's part of phase switching: end fences, measurements, the next phase's length
/// and the quota of its own cross-partition load.
pub(crate) struct Coordinator {
    iteration_ns: u64,
    /// The configured cross-partition share when the nodes generate their load.
    load_share: Option<f64>,
    end_fences: EndFences,
    fence_requested: bool,
    partitioned: Rate,
    single_master: Rate,
    /// Requests that arrived in the last two phases: (single-partition, cross-partition).
    recent: [(u64, u64); 2],
    arrived_cross: u64,
    queued_single: u64,
    single_generated: u64,
    cross_generated: u64,
    /// When each phase's fence completed, by phase (phase 1 first), if kept.
    ends: Option<Vec<u64>>,
}

impl Coordinator {
    /// The coordinator of a cluster of `nodes` nodes with iterations of `iteration_ns`; with
    /// `load_share` the nodes generate their own load with that cross-partition share.
    pub(crate) fn new(
        nodes: u32,
        iteration_ns: u64,
        load_share: Option<f64>,
        keep_ends: bool,
    ) -> Self {
        Coordinator {
            iteration_ns,
            load_share,
            end_fences: EndFences::new(nodes),
            fence_requested: false,
            partitioned: Rate::default(),
            single_master: Rate::default(),
            recent: [(0, 0); 2],
            arrived_cross: 0,
            queued_single: 0,
            single_generated: 0,
            cross_generated: 0,
            ends: keep_ends.then(Vec::new),
        }
    }

    /// Changes whether the nodes generate load (and its share).
    pub(crate) fn set_load_share(&mut self, share: Option<f64>) {
        self.load_share = share;
    }

    /// The length of phase `phase`, from what was measured so far and the work waiting.
    pub(crate) fn length_of(&self, phase: Phase, queued_cross: u64) -> u64 {
        let s = self.single_master_share(queued_cross);
        let share = match PhaseKind::of(phase) {
            PhaseKind::Partitioned => 1.0 - s,
            PhaseKind::SingleMaster => s,
        };
        (self.iteration_ns as f64 * share).round() as u64
    }

    /// The share `s` of the iteration the single-master phase gets (module doc).
    pub(crate) fn single_master_share(&self, queued_cross: u64) -> f64 {
        let (c, p) = match self.load_share {
            Some(x) => (x, 1.0 - x),
            None => {
                let (single, cross) = (
                    self.recent.iter().map(|r| r.0).sum::<u64>() + self.queued_single,
                    self.recent.iter().map(|r| r.1).sum::<u64>()
                        + self.arrived_cross
                        + queued_cross,
                );
                (cross as f64, single as f64)
            }
        };
        if c <= 0.0 {
            return 0.0;
        }
        if p <= 0.0 {
            return 1.0;
        }
        let (r_sm, r_p) = match (self.single_master.per_ns(), self.partitioned.per_ns()) {
            (Some(a), Some(b)) => (a, b),
            _ => (1.0, 1.0),
        };
        let s = (c / r_sm) / (c / r_sm + p / r_p);
        s.clamp(MIN_SHARE, 1.0 - MIN_SHARE)
    }

    /// Node `node` failed: its end fences are no longer awaited (see `fence::EndFences`).
    pub(crate) fn on_failure(&mut self, node: Addr) {
        self.end_fences.on_failure(node);
    }

    /// Restarted node `node` is a member again: its end fences are awaited.
    pub(crate) fn on_rejoin(&mut self, node: Addr) {
        self.end_fences.on_rejoin(node);
    }

    /// Phase `phase` began on the coordinator.
    pub(crate) fn on_begin(&mut self, phase: Phase) {
        self.end_fences.reset(phase);
        self.fence_requested = false;
    }

    /// Whether to send start fence now: the phase is due, or a single-master phase has no work.
    pub(crate) fn should_end(&mut self, kind: PhaseKind, due: bool, cross_work: bool) -> bool {
        if self.fence_requested {
            return false;
        }
        let end = due || (kind == PhaseKind::SingleMaster && !cross_work);
        self.fence_requested = end;
        end
    }

    /// A cross-partition request arrived at the coordinator.
    pub(crate) fn on_cross_arrival(&mut self) {
        self.arrived_cross += 1;
    }

    /// The coordinator generated a cross-partition request.
    pub(crate) fn on_cross_generated(&mut self) {
        self.cross_generated += 1;
    }

    /// Cross-partition requests the coordinator's load may still generate (see the module doc).
    pub(crate) fn cross_quota(&self) -> u64 {
        match self.load_share {
            None => 0,
            Some(x) if x >= 1.0 => u64::MAX,
            Some(x) if x <= 0.0 => 0,
            Some(x) => {
                let target = (x / (1.0 - x) * self.single_generated as f64).floor() as u64;
                target.saturating_sub(self.cross_generated)
            }
        }
    }

    /// Node `from` ended the fence of `phase`, which executed for `exec_ns` on the coordinator.
    /// Returns true once every node has: the phase is over.
    pub(crate) fn on_end_fence(
        &mut self,
        phase: Phase,
        from: Addr,
        report: PhaseReport,
        exec_ns: u64,
        now: u64,
    ) -> bool {
        let Some(sum) = self.end_fences.on_end(phase, from, report) else {
            return false;
        };
        let rate = Rate {
            ran: sum.ran,
            ns: exec_ns,
        };
        let kind = PhaseKind::of(phase);
        if rate.per_ns().is_some() {
            match kind {
                PhaseKind::Partitioned => self.partitioned = rate,
                PhaseKind::SingleMaster => self.single_master = rate,
            }
        }
        if kind == PhaseKind::Partitioned {
            self.single_generated += sum.generated;
        }
        self.recent = [self.recent[1], (sum.arrived_single, self.arrived_cross)];
        self.arrived_cross = 0;
        self.queued_single = sum.queued_single;
        if let Some(ends) = &mut self.ends {
            ends.push(now);
        }
        true
    }

    /// When each phase's fence completed (phase 1 first), if kept.
    pub(crate) fn phase_ends(&self) -> &[u64] {
        self.ends.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 10_000_000;

    #[test]
    fn without_cross_partition_work_the_single_master_phase_is_a_bare_fence() {
        let c = Coordinator::new(3, T, Some(0.0), false);
        assert_eq!(c.length_of(2, 0), 0);
        assert_eq!(c.length_of(1, 0), T);
        assert_eq!(c.cross_quota(), 0);
    }

    #[test]
    fn only_cross_partition_work_leaves_the_partitioned_phase_empty() {
        let c = Coordinator::new(3, T, Some(1.0), false);
        assert_eq!(c.length_of(1, 0), 0);
        assert_eq!(c.length_of(2, 0), T);
        assert_eq!(c.cross_quota(), u64::MAX);
    }

    #[test]
    fn the_split_follows_the_share_and_the_measured_rates() {
        let mut c = Coordinator::new(1, T, Some(0.2), false);
        assert_eq!(c.length_of(2, 0), T / 5, "unmeasured rates count as equal");
        // Partitioned: 800 transactions in 8 ms; single-master: 100 in 2 ms (half the rate).
        let report = |ran| PhaseReport {
            ran,
            generated: ran,
            ..PhaseReport::default()
        };
        c.on_begin(1);
        assert!(c.on_end_fence(1, 0, report(800), 8_000_000, 0));
        c.on_begin(2);
        assert!(c.on_end_fence(2, 0, report(100), 2_000_000, 0));
        // s = (0.2 / 0.05) / (0.2 / 0.05 + 0.8 / 0.1) = 4 / 12.
        let s = c.single_master_share(0);
        assert!((s - 1.0 / 3.0).abs() < 1e-9, "{s}");
        assert_eq!(
            c.cross_quota(),
            200,
            "x / (1 - x) of 800 single-partition requests"
        );
        c.on_cross_generated();
        assert_eq!(c.cross_quota(), 199);
    }

    #[test]
    fn client_requests_split_by_what_arrived_and_waits() {
        let mut c = Coordinator::new(1, T, None, false);
        assert_eq!(c.single_master_share(0), 0.0);
        c.on_cross_arrival();
        assert_eq!(c.single_master_share(0), 1.0, "no single-partition work");
        c.on_begin(1);
        let report = PhaseReport {
            arrived_single: 3,
            ..PhaseReport::default()
        };
        assert!(c.on_end_fence(1, 0, report, 1, 0));
        assert_eq!(c.single_master_share(0), 0.25);
        assert_eq!(c.single_master_share(1_000), 1.0 - MIN_SHARE);
    }

    #[test]
    fn a_phase_is_ended_once() {
        let mut c = Coordinator::new(1, T, None, false);
        c.on_begin(2);
        assert!(!c.should_end(PhaseKind::SingleMaster, false, true));
        assert!(c.should_end(PhaseKind::SingleMaster, false, false));
        assert!(!c.should_end(PhaseKind::SingleMaster, true, false));
        c.on_begin(3);
        assert!(c.should_end(PhaseKind::Partitioned, true, false));
    }
}
