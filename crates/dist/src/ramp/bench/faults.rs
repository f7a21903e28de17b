//! Failures in a cluster benchmark run: the one it injects (`--kill-node I --at SECS
//! [--restart-after SECS]`, SIGKILL, not a request to stop) and the ones it meets (a node process
//! that ended unasked, a node that stopped answering). Every algorithm's benchmark keeps one
//! [`Faults`], ticks it with its clock and reports its [`Event`]s; a death not asked for makes the
//! run fail.

use std::time::Duration;

use serde::Serialize;

use super::launch::ProcessCluster;

/// The failure to inject into a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultPlan {
    /// The node to kill.
    pub node: usize,
    /// When to kill it, from the start of the load (warm-up included).
    pub at: Duration,
    /// How long after the kill to start the same node again, if at all.
    pub restart_after: Option<Duration>,
}

impl FaultPlan {
    /// The plan the flags ask for, or why it cannot run on a cluster of `nodes` the benchmark
    /// starts itself (`started`: a cluster it only connects to cannot be killed from here).
    pub fn from_flags(
        node: Option<usize>,
        at: Option<f64>,
        restart_after: Option<f64>,
        nodes: usize,
        started: bool,
    ) -> Result<Option<FaultPlan>, String> {
        let Some(node) = node else {
            if at.is_some() || restart_after.is_some() {
                return Err("--at and --restart-after need --kill-node".into());
            }
            return Ok(None);
        };
        if !started {
            return Err(
                "--kill-node needs --cluster N: the benchmark kills only node processes it started"
                    .into(),
            );
        }
        if node >= nodes {
            return Err(format!(
                "--kill-node {node}: the cluster has nodes 0..{nodes}"
            ));
        }
        let secs = |name: &str, v: f64| {
            if v.is_finite() && (0.0..=86_400.0).contains(&v) {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(format!(
                    "{name} must be a number of seconds between 0 and 86400"
                ))
            }
        };
        let at = secs("--at", at.ok_or("--kill-node needs --at SECS")?)?;
        let restart_after = restart_after
            .map(|r| secs("--restart-after", r))
            .transpose()?;
        Ok(Some(FaultPlan {
            node,
            at,
            restart_after,
        }))
    }
}

/// What happened to a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum EventKind {
    /// Killed with SIGKILL as the plan asked.
    Killed,
    /// Started again as the plan asked.
    Restarted,
    /// The plan's kill or restart could not be done.
    InjectFailed(String),
    /// The process ended without being asked to (how it ended).
    Died(String),
    /// The node stopped answering the benchmark (how the benchmark noticed).
    Silent(String),
    /// A node that had stopped answering answers again.
    Answering,
}

/// One failure event, at a time of the run's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Time since the load started.
    #[serde(rename = "at_s", serialize_with = "secs")]
    pub at: Duration,
    /// The node.
    pub node: usize,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// The failures of one run: injects the plan's and records every event.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    plan: Option<FaultPlan>,
    killed_at: Option<Duration>,
    restarted_at: Option<Duration>,
    /// Every event so far, in time order.
    pub events: Vec<Event>,
    /// Nodes that ended or fell silent unasked, and are not answering again.
    reported: Vec<usize>,
}

impl Faults {
    /// Failures of a run that injects `plan`.
    pub fn new(plan: Option<FaultPlan>) -> Faults {
        Faults {
            plan,
            ..Faults::default()
        }
    }

    /// The plan.
    pub fn plan(&self) -> Option<FaultPlan> {
        self.plan
    }

    /// Whether an event of `kind` of `node` at `at` follows from the plan: the killed node dead
    /// (before its restart) or silent (from the kill on; whether a restarted node answers again
    /// is reported apart).
    fn excused(&self, node: usize, at: Duration, kind: &EventKind) -> bool {
        let killed =
            self.plan.is_some_and(|p| p.node == node) && self.killed_at.is_some_and(|k| k <= at);
        match kind {
            EventKind::Died(_) => killed && self.restarted_at.is_none_or(|r| at < r),
            EventKind::Silent(_) => killed,
            _ => true,
        }
    }

    /// Called with the run's clock (time since the load started), often (every interval): kills
    /// or restarts what the plan says is due, and records node processes that ended unasked.
    pub fn tick(&mut self, cluster: Option<&mut ProcessCluster>, now: Duration) {
        let Some(cluster) = cluster else {
            return;
        };
        if let Some(plan) = self.plan {
            if self.killed_at.is_none() && now >= plan.at {
                self.killed_at = Some(now);
                let kind = match cluster.kill(plan.node) {
                    Ok(()) => EventKind::Killed,
                    Err(e) => EventKind::InjectFailed(e),
                };
                self.push(now, plan.node, kind);
            }
            if let (Some(killed), Some(after)) = (self.killed_at, plan.restart_after)
                && self.restarted_at.is_none()
                && now >= killed + after
            {
                self.restarted_at = Some(now);
                let kind = match cluster.restart(plan.node) {
                    Ok(()) => EventKind::Restarted,
                    Err(e) => EventKind::InjectFailed(e),
                };
                self.push(now, plan.node, kind);
            }
        }
        for (node, why) in cluster.exited_nodes() {
            if !self.reported.contains(&node) {
                self.reported.push(node);
                self.push(now, node, EventKind::Died(why));
            }
        }
    }

    /// Records that `node` stopped answering the benchmark (`why`), unless already reported.
    pub fn silent(&mut self, now: Duration, node: usize, why: String) {
        if self.reported.contains(&node) {
            return;
        }
        self.reported.push(node);
        self.push(now, node, EventKind::Silent(why));
    }

    /// Adds an event another watcher recorded (the clients' silences), in time order; a silence
    /// of the node killed on purpose, noticed after the kill, is expected and left out.
    pub fn note(&mut self, e: Event) {
        if matches!(e.kind, EventKind::Silent(_)) && self.excused(e.node, e.at, &e.kind) {
            return;
        }
        let i = self.events.partition_point(|x| x.at <= e.at);
        self.events.insert(i, e);
    }

    /// Records that `node`, silent before, answers again.
    pub fn answering(&mut self, now: Duration, node: usize) {
        if let Some(i) = self.reported.iter().position(|&n| n == node) {
            self.reported.swap_remove(i);
            self.push(now, node, EventKind::Answering);
        }
    }

    fn push(&mut self, at: Duration, node: usize, kind: EventKind) {
        self.events.push(Event { at, node, kind });
    }

    /// The events that make the run fail: a death or silence not asked for (a node killed on
    /// purpose and silent since is asked for), a kill or restart that could not be done.
    pub fn unasked(&self) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| match &e.kind {
                EventKind::Killed | EventKind::Restarted | EventKind::Answering => false,
                EventKind::InjectFailed(_) => true,
                EventKind::Died(_) | EventKind::Silent(_) => !self.excused(e.node, e.at, &e.kind),
            })
            .collect()
    }

    /// One line per event, for a report.
    pub fn lines(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| {
                let what = match &e.kind {
                    EventKind::Killed => "killed (SIGKILL) as asked".to_string(),
                    EventKind::Restarted => "restarted as asked".to_string(),
                    EventKind::InjectFailed(why) => {
                        format!("could not be killed or restarted: {why}")
                    }
                    EventKind::Died(why) => format!("died unasked: {why}"),
                    EventKind::Silent(why) => format!("stopped answering: {why}"),
                    EventKind::Answering => "answers again".to_string(),
                };
                format!("{:>8.3} s  node {}  {what}", e.at.as_secs_f64(), e.node)
            })
            .collect()
    }
}

/// Throughput per interval: transactions finished in each, from a counter sampled at the ends of
/// intervals of one length (the first sample opens the first interval).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// The interval's length in seconds.
    pub interval_s: f64,
    /// Per interval: its end (seconds since the load started) and transactions per second in it.
    pub points: Vec<(f64, f64)>,
}

impl Timeline {
    /// Throughput, in transactions per second, over the intervals between consecutive samples
    /// `(time since the load started, counter)`.
    pub fn from_samples(interval: Duration, samples: &[(Duration, u64)]) -> Timeline {
        let points = samples
            .windows(2)
            .map(|w| {
                let secs = (w[1].0.saturating_sub(w[0].0)).as_secs_f64().max(1e-9);
                let n = w[1].1.saturating_sub(w[0].1);
                (w[1].0.as_secs_f64(), n as f64 / secs)
            })
            .collect();
        Timeline {
            interval_s: interval.as_secs_f64(),
            points,
        }
    }

    /// Intervals with nothing finished: a stall.
    pub fn stalled(&self) -> usize {
        self.points.iter().filter(|p| p.1 == 0.0).count()
    }

    /// The longest run of consecutive stalled intervals, in seconds.
    pub fn longest_stall_s(&self) -> f64 {
        let (mut run, mut best) = (0usize, 0usize);
        for p in &self.points {
            run = if p.1 == 0.0 { run + 1 } else { 0 };
            best = best.max(run);
        }
        best as f64 * self.interval_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_make_a_plan_or_say_why_not() {
        assert_eq!(FaultPlan::from_flags(None, None, None, 3, true), Ok(None));
        let plan = FaultPlan::from_flags(Some(2), Some(1.5), Some(0.5), 3, true)
            .unwrap()
            .unwrap();
        assert_eq!(plan.at, Duration::from_millis(1500));
        assert_eq!(plan.restart_after, Some(Duration::from_millis(500)));
        for (node, at, restart, started, says) in [
            (None, Some(1.0), None, true, "need --kill-node"),
            (Some(3), Some(1.0), None, true, "nodes 0..3"),
            (Some(0), None, None, true, "needs --at"),
            (Some(0), Some(-1.0), None, true, "--at must be"),
            (
                Some(0),
                Some(1.0),
                Some(f64::NAN),
                true,
                "--restart-after must be",
            ),
            (Some(0), Some(1.0), None, false, "needs --cluster"),
        ] {
            let e = FaultPlan::from_flags(node, at, restart, 3, started).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_silent_node_fails_the_run_unless_it_was_killed_on_purpose() {
        let mut f = Faults::new(None);
        f.silent(Duration::from_secs(1), 1, "no answer".into());
        f.silent(Duration::from_secs(2), 1, "no answer".into());
        assert_eq!(f.events.len(), 1, "reported once");
        assert_eq!(f.unasked().len(), 1);
        f.answering(Duration::from_secs(3), 1);
        assert_eq!(f.events[1].kind, EventKind::Answering);
        assert_eq!(f.unasked().len(), 1, "the silence stays a failure");
        assert!(f.lines()[0].contains("node 1  stopped answering"));

        let mut f = Faults::new(Some(FaultPlan {
            node: 1,
            at: Duration::ZERO,
            restart_after: None,
        }));
        f.killed_at = Some(Duration::ZERO);
        f.silent(Duration::from_secs(1), 1, "no answer".into());
        assert!(f.unasked().is_empty(), "a node down as asked fails nothing");
        let mut other = Faults::new(None);
        other.silent(Duration::from_secs(1), 1, "no answer".into());
        other.silent(Duration::from_millis(500), 0, "no answer".into());
        for e in other.events {
            f.note(e);
        }
        assert_eq!(
            f.events.len(),
            2,
            "the killed node's silence is not noted twice"
        );
        assert_eq!(f.events[0].node, 0, "in time order");
        assert_eq!(f.unasked().len(), 1);
        f.restarted_at = Some(Duration::from_secs(2));
        f.push(Duration::from_secs(3), 1, EventKind::Died("exit 1".into()));
        assert_eq!(f.unasked().len(), 2, "the restarted node died unasked");
    }

    #[test]
    fn a_timeline_shows_a_stall() {
        let ms = Duration::from_millis;
        let samples = [
            (ms(0), 0),
            (ms(100), 50),
            (ms(200), 50),
            (ms(300), 50),
            (ms(400), 80),
        ];
        let t = Timeline::from_samples(ms(100), &samples);
        assert_eq!(t.points.len(), 4);
        assert!((t.points[0].1 - 500.0).abs() < 1e-6);
        assert_eq!(t.stalled(), 2);
        assert!((t.longest_stall_s() - 0.2).abs() < 1e-9);
        let json = serde_json::to_string(&Event {
            at: ms(1500),
            node: 2,
            kind: EventKind::Died("signal 9".into()),
        })
        .unwrap();
        assert_eq!(
            json,
            r#"{"at_s":1.5,"node":2,"kind":"died","detail":"signal 9"}"#
        );
    }
}
