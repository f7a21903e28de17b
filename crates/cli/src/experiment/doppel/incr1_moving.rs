//! `incr1-moving`: INCR1 whose hot key changes identity at a fixed interval; throughput over time.

use std::time::Duration;

use phasedb_workloads::BenchOptions;
use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};

use super::super::claims::{Claim, Verdict};
use super::super::sweep::{Metrics, Row};
use super::super::{Artifacts, Settings};
use super::{Finish, PHASE, options, protocols, run_setup};
use crate::bench::run_named_observed;

const PAPER: &str = "With 10% of transactions on one hot key whose identity changes every 5 s, \
Doppel's throughput dips briefly at each change, until it notices the new hot key and splits it, \
then returns to its level (Figure 10).";

/// Throughput of one progress window.
struct Window {
    at: f64,
    rate: f64,
}

/// Runs `cfg` on `p` and returns its throughput per progress window of the measured part.
fn over_time(
    p: &super::Protocol,
    cfg: &IncrConfig,
    opts: &BenchOptions,
) -> (Vec<Window>, Result<(), String>) {
    let mut windows = Vec::new();
    let mut last = (Duration::ZERO, 0u64);
    let warmup = opts.warmup;
    let result = run_named_observed(p.id, &mut Incr::new(cfg.clone()), opts, &mut |t, n| {
        if t > warmup && t > last.0 {
            windows.push(Window {
                at: t.as_secs_f64(),
                rate: (n - last.1) as f64 / (t - last.0).as_secs_f64(),
            });
        }
        last = (t, n);
    });
    (windows, result.check.clone())
}

/// Time from each change of hot key until throughput is back to 80% of its level in the second
/// before the change (held for two windows); `None` where it never came back.
fn recoveries(w: &[Window], every: f64) -> Vec<Option<f64>> {
    let end = w.last().map_or(0.0, |x| x.at);
    let mut out = Vec::new();
    let mut change = every;
    while change < end {
        let mut before: Vec<f64> = w
            .iter()
            .filter(|x| x.at > change - every.min(1.0) && x.at <= change)
            .map(|x| x.rate)
            .collect();
        before.sort_by(f64::total_cmp);
        if let Some(&level) = before.get(before.len() / 2) {
            let after: Vec<&Window> = w.iter().filter(|x| x.at > change).collect();
            let back = after
                .windows(2)
                .find(|p| p.iter().all(|x| x.rate >= 0.8 * level));
            out.push(back.map(|p| p[0].at - change));
        }
        change += every;
    }
    out
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let every = if s.quick {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(2)
    };
    let keys = if s.quick { 10_000 } else { 1_000_000 };
    let threads = s.threads_max();
    let mut opts = options(s, threads, PHASE);
    opts.duration = every * 4;
    let mut rows = Vec::new();
    let mut recovery: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for hot in [0.1, 1.0] {
        for p in protocols(s, &["doppel", "occ"]) {
            let cfg = IncrConfig {
                keys,
                choice: KeyChoice::Moving { hot, every },
            };
            cfg.validate()?;
            eprintln!("{}: {} with {:.0}% hot", s.name, p.name, hot * 100.0);
            let (windows, check) = over_time(&p, &cfg, &opts);
            let series = format!("{} {:.0}% hot", p.name, hot * 100.0);
            if p.name == "doppel" {
                recovery.push((series.clone(), recoveries(&windows, every.as_secs_f64())));
            }
            for w in &windows {
                rows.push(Row {
                    params: vec![
                        ("protocol".into(), series.clone()),
                        ("hot".into(), hot.to_string()),
                        ("seconds".into(), format!("{:.3}", w.at)),
                    ],
                    series: series.clone(),
                    x: w.at,
                    metrics: Metrics {
                        throughput: w.rate,
                        ..Metrics::default()
                    },
                    rounds: Vec::new(),
                    check: match &check {
                        Ok(()) => "ok".into(),
                        Err(e) => e.clone(),
                    },
                    applicable: check.clone(),
                });
            }
        }
    }
    let cycle = PHASE.as_secs_f64() * (1.0 + phasedb_txn::SplitPolicy::default().joined_share);
    let tick = 0.02;
    let claims = recovery
        .iter()
        .map(|(series, r)| {
            let worst = r
                .iter()
                .copied()
                .try_fold(0.0f64, |m, x| x.map(|x| m.max(x)));
            let shown: Vec<String> = r
                .iter()
                .map(|x| x.map_or("never".into(), |x| format!("{:.0} ms", x * 1000.0)))
                .collect();
            Claim {
                statement: format!(
                    "{series}: after each change of hot key, throughput recovers within 2 phase \
                     cycles ({:.0} ms, plus one {:.0} ms measuring window)",
                    2.0 * cycle * 1000.0,
                    tick * 1000.0
                ),
                paper: "Doppel dips briefly at each change, then re-splits the new hot key".into(),
                measured: format!("recovery after each change: {}", shown.join(", ")),
                verdict: match worst {
                    _ if r.is_empty() => {
                        Verdict::NotChecked("no change of hot key measured".into())
                    }
                    None => Verdict::DoesNotHold,
                    Some(w) => Verdict::from_bool(w <= 2.0 * cycle + tick),
                },
            }
        })
        .collect();
    let mut setup = vec![format!(
        "INCR1 on {keys} keys with 10% and with 100% of transactions on a hot key that changes \
         every {:.2} s (the paper: 5 s); throughput per {:.0} ms window over {:.1} s measured; \
         recovery = time until two windows in a row reach 80% of the median of the second before",
        every.as_secs_f64(),
        tick * 1000.0,
        opts.duration.as_secs_f64()
    )];
    setup.extend(run_setup(
        s,
        threads,
        "one run per protocol and hot share, in this process",
    ));
    Ok(Finish {
        title: "incr1-moving: a hot key that moves",
        x_label: "seconds",
        setup,
        paper: PAPER,
        claims,
        columns: &[],
        table: false,
    }
    .artifacts(s, rows))
}
