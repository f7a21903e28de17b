//! `incr1-scaling`: INCR1 with every transaction on the hot key, as worker threads are added.

use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::{Artifacts, Settings};
use super::{Finish, PHASE, common_setup, measure, options, point, protocols, series, sweep};

const PAPER: &str = "With every transaction incrementing the one hot key, Doppel's throughput \
grows with each core added while OCC, 2PL and Atomic stay at or below serial speed (their \
throughput per core falls as about 1/cores; Figure 9).";

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let keys = if s.quick { 10_000 } else { 1_000_000 };
    let mut points = Vec::new();
    for &t in &s.threads {
        for p in protocols(s, &["doppel", "occ", "2pl", "atomic"]) {
            let cfg = IncrConfig {
                keys,
                choice: KeyChoice::Hot(1.0),
            };
            let opts = options(s, t, PHASE);
            let p2 = p.clone();
            points.push(point(
                &p,
                t as f64,
                vec![("threads", t.to_string())],
                move || measure(&p2, Incr::new(cfg.clone()), &opts),
            ));
        }
    }
    let rows = sweep(s, points);
    let scaling = |p: &str| {
        let v = series(&rows, p);
        let (first, last) = (v.first()?, v.last()?);
        (last.x > first.x)
            .then(|| ratio(last.metrics.throughput, first.metrics.throughput))
            .flatten()
            .map(|r| (r, first.x, last.x))
    };
    let d = scaling("doppel");
    let others: Vec<(String, f64)> = ["occ", "2pl", "atomic"]
        .iter()
        .filter_map(|p| Some((p.to_string(), scaling(p)?.0)))
        .collect();
    let measured = format!(
        "throughput at the most threads over one thread: doppel {}{}{}",
        times(d.map(|x| x.0)),
        others
            .iter()
            .map(|(p, r)| format!(", {p} {}", times(Some(*r))))
            .collect::<String>(),
        super::flip_note(&[d.map(|x| x.0)], 1.3)
    );
    let verdict = match d {
        None => Verdict::NotChecked("doppel ran at a single thread count".into()),
        Some((r, _, _)) => Verdict::from_bool(r >= 1.3 && others.iter().all(|(_, o)| *o < r)),
    };
    let claims = vec![Claim {
        statement: "Doppel adds throughput with threads (≥1.3x from one thread to the most) and \
                    scales better than OCC, 2PL and Atomic"
            .into(),
        paper: "Doppel's throughput grows with cores; the others flatten or fall".into(),
        measured,
        verdict,
    }];
    let mut setup = vec![format!(
        "INCR1 with 100% of transactions on the hot key, {keys} keys; x = worker threads; \
         Doppel's phase length {} ms",
        PHASE.as_millis()
    )];
    setup.extend(common_setup(s, s.threads_max()));
    Ok(Finish {
        title: "incr1-scaling: one hot key, more threads",
        x_label: "threads",
        setup,
        paper: PAPER,
        claims,
        columns: &[("records split", "split_records")],
        table: true,
    }
    .artifacts(s, rows))
}
