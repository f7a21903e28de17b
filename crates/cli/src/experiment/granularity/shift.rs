//! `granularity-shift`: a workload whose conflicting columns change halfway through the run
//! ([`phasedb_workloads::shift`]), on OCC with every fixed grouping and with automatic groups; the
//! abort rate per interval, and whether automatic groups follow the change (issue 39).

use std::time::Duration;

use phasedb_txn::Config;
use phasedb_workloads::BenchOptions;
use phasedb_workloads::shift::{Interval, Shift, ShiftConfig, ShiftGroups};

use super::super::claims::{Claim, Verdict};
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use super::grid::MAX_RETRIES;
use super::report::Finish;
use crate::bench::{ProtocolName, run_named};

const PAPER: &str = "Not in the paper, which fixes the split in the schema; phasedb's issue 39 \
target: when the columns that conflict change, automatic column groups follow, and the abort \
rate returns within 2 s to within 1.2x that of the best fixed grouping for the new phase.";

/// The thread count of the target.
const THREADS: usize = 2;

/// Time after the change within which automatic groups must have followed it.
const FOLLOW: Duration = Duration::from_secs(2);

/// One grouping's run: its abort counts per interval and the group changes it reported.
struct Series {
    groups: ShiftGroups,
    intervals: Vec<Interval>,
    changes: String,
    check: Result<(), String>,
}

impl Series {
    /// Summed counts of the intervals from `from` to `to` (indices).
    fn window(&self, from: usize, to: usize) -> Interval {
        let mut sum = Interval::default();
        for iv in self.intervals.iter().take(to).skip(from) {
            sum.committed += iv.committed;
            sum.conflicts += iv.conflicts;
        }
        sum
    }
}

/// Abort rates of the fixed groupings and of `auto` over the intervals `from..to`, and the claim
/// that `auto` is within `factor` (plus a tenth of a percentage point) of the best fixed one. The
/// verdict is not checked unless the wrong grouping (`wrong`) aborted clearly more than the best:
/// without contention there is nothing to follow.
fn follows(
    series: &[Series],
    (from, to): (usize, usize),
    wrong: ShiftGroups,
    statement: String,
) -> Claim {
    let rate = |g: ShiftGroups| {
        series
            .iter()
            .find(|s| s.groups == g && s.check.is_ok())
            .map(|s| s.window(from, to).abort_rate())
    };
    let fixed: Vec<(ShiftGroups, f64)> = (ShiftGroups::ALL.iter())
        .filter(|&&g| g != ShiftGroups::Auto)
        .filter_map(|&g| Some((g, rate(g)?)))
        .collect();
    let best = fixed.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    let shown = |r: f64| format!("{:.2}%", r * 100.0);
    let mut measured = fixed
        .iter()
        .map(|(g, r)| format!("{} {}", g.name(), shown(*r)))
        .collect::<Vec<_>>()
        .join(", ");
    let auto = rate(ShiftGroups::Auto);
    if let Some(a) = auto {
        measured += &format!(", auto {}", shown(a));
    }
    let verdict = match (best, auto, rate(wrong)) {
        (Some((_, b)), Some(a), Some(w)) => {
            if w <= 2.0 * b + 0.005 {
                Verdict::NotChecked(format!(
                    "the wrong grouping ({}) aborted about as often as the best: no false \
                     conflicts to remove",
                    wrong.name()
                ))
            } else {
                Verdict::from_bool(a <= 1.2 * b + 0.001)
            }
        }
        _ => Verdict::NotChecked("a grouping did not run".into()),
    };
    Claim {
        statement,
        paper: PAPER.into(),
        measured: format!("abort rate, OCC: {measured}"),
        verdict,
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let (switch, after, interval) = if s.quick {
        (
            Duration::from_millis(500),
            Duration::from_millis(700),
            Duration::from_millis(50),
        )
    } else {
        (
            Duration::from_secs(2),
            Duration::from_secs(3),
            Duration::from_millis(100),
        )
    };
    let follow = if s.quick {
        Duration::from_millis(400)
    } else {
        FOLLOW
    };
    let threads = if s.threads.contains(&THREADS) {
        THREADS
    } else {
        s.threads_max()
    };
    let opts = BenchOptions {
        threads,
        warmup: Duration::ZERO,
        duration: switch + after,
        seed: s.seed,
        durable_results: false,
        durable_progress: false,
        config: Config {
            max_retries: Some(MAX_RETRIES),
            ..Config::default()
        },
    };
    let cfg = |groups| ShiftConfig {
        switch_after: switch,
        interval,
        groups,
        ..ShiftConfig::default()
    };
    cfg(ShiftGroups::Auto).validate()?;
    let mut series = Vec::new();
    let mut rows = Vec::new();
    for groups in ShiftGroups::ALL {
        eprintln!("{}: occ {}", s.name, groups.name());
        let mut w = Shift::new(cfg(groups));
        let r = run_named(ProtocolName::Occ, &mut w, &opts);
        let changes = (r.protocol_report.iter())
            .find(|(k, _)| *k == "group_changes")
            .map_or(String::new(), |(_, v)| v.clone());
        let name = format!("occ {}", groups.name());
        let intervals = w.intervals();
        for (i, iv) in intervals.iter().enumerate() {
            let at = i as f64 * interval.as_secs_f64();
            rows.push(Row {
                params: vec![
                    ("protocol".into(), name.clone()),
                    ("granularity".into(), groups.name().into()),
                    ("seconds".into(), format!("{at:.3}")),
                ],
                series: name.clone(),
                x: at,
                metrics: Metrics {
                    throughput: iv.committed as f64 / interval.as_secs_f64(),
                    abort_rate: iv.abort_rate(),
                    committed: iv.committed,
                    ..Metrics::default()
                },
                rounds: Vec::new(),
                check: match &r.check {
                    Ok(()) => "ok".into(),
                    Err(e) => e.clone(),
                },
                applicable: r.check.clone(),
            });
        }
        series.push(Series {
            groups,
            intervals,
            changes,
            check: r.check,
        });
    }
    let at = |d: Duration| (d.as_nanos() / interval.as_nanos()) as usize;
    let end = at(switch + after);
    let claims = vec![
        follows(
            &series,
            (at(switch / 2), at(switch)),
            ShiftGroups::Second,
            format!(
                "phase 1: automatic groups abort at most 1.2x as often as the best fixed grouping \
                 over its second half ({:.2}-{:.2} s)",
                (switch / 2).as_secs_f64(),
                switch.as_secs_f64()
            ),
        ),
        follows(
            &series,
            (at(switch + follow), end),
            ShiftGroups::First,
            format!(
                "phase 2: from {:.1} s after the change on, automatic groups abort at most 1.2x \
                 as often as the best fixed grouping",
                follow.as_secs_f64()
            ),
        ),
    ];
    let mut setup = vec![
        format!(
            "{} rows of four counters, {} rows per transaction, half writers and half readers; \
             phase 1 writers update c0 c1 and readers read c2 c3, phase 2 (from {:.1} s) writers \
             update c0 c2 and readers read c1 c3; OCC, {threads} threads, {:.1} s, abort rate per \
             {:.0} ms",
            cfg(ShiftGroups::Auto).rows,
            cfg(ShiftGroups::Auto).ops,
            switch.as_secs_f64(),
            (switch + after).as_secs_f64(),
            interval.as_secs_f64() * 1000.0
        ),
        "fixed groupings: coarse (one per row), fine (one per counter), first {c0 c1}{c2 c3}, \
         second {c0 c2}{c1 c3}; auto starts coarse"
            .to_string(),
        format!(
            "one run per grouping, one after another, no warm-up, seed {}, on {}",
            s.seed,
            s.machine()
        ),
    ];
    if let Some(a) = series.iter().find(|x| x.groups == ShiftGroups::Auto) {
        setup.push(format!("auto's group changes: {}", a.changes));
    }
    Ok(Finish {
        title: "granularity-shift: automatic groups follow a change of workload",
        setup,
        paper: PAPER,
        claims,
    }
    .artifacts_over_time(s, rows))
}
