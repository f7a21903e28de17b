//! `incrz`: every transaction increments one key chosen with a zipfian distribution; Doppel against
//! OCC as the skew grows, with the number of keys Doppel splits.

use phasedb_workloads::incr::{Incr, IncrConfig, KeyChoice};

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::{Artifacts, Settings};
use super::{Finish, PHASE, at, common_setup, measure, num, options, point, protocols, sweep};

const PAPER: &str = "On 1M keys with zipfian key choice, Doppel runs like OCC until alpha is about \
0.8 (nothing is contended enough to split), then pulls ahead as a few keys take most increments; \
it splits between 1 and 4 keys (Figure 11).";

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let alphas: &[f64] = if s.quick {
        &[0.0, 1.6]
    } else {
        &[0.0, 0.4, 0.8, 1.2, 1.4, 1.6, 2.0]
    };
    let keys = if s.quick { 10_000 } else { 1_000_000 };
    let threads = s.threads_max();
    let mut points = Vec::new();
    for &a in alphas {
        for p in protocols(s, &["doppel", "occ"]) {
            let cfg = IncrConfig {
                keys,
                choice: KeyChoice::Zipf(a),
            };
            cfg.validate()?;
            let opts = options(s, threads, PHASE);
            let p2 = p.clone();
            points.push(point(&p, a, vec![("alpha", a.to_string())], move || {
                measure(&p2, Incr::new(cfg.clone()), &opts)
            }));
        }
    }
    let rows = sweep(s, points);
    let r = |a: f64| {
        at(&rows, "doppel", a)
            .zip(at(&rows, "occ", a))
            .and_then(|(d, o)| ratio(d.metrics.throughput, o.metrics.throughput))
    };
    let low: Vec<(f64, Option<f64>)> = alphas
        .iter()
        .filter(|&&a| a < 0.8)
        .map(|&a| (a, r(a)))
        .collect();
    let high = *alphas.last().expect("alphas");
    let split = at(&rows, "doppel", high).and_then(|d| num(d, "split_records"));
    let claims = vec![
        Claim {
            statement: "below alpha 0.8 Doppel keeps at least 0.95x OCC".into(),
            paper: "Doppel = OCC until alpha ~0.8".into(),
            measured: low
                .iter()
                .map(|(a, x)| format!("alpha {a}: {}", times(*x)))
                .collect::<Vec<_>>()
                .join(", "),
            verdict: if low.iter().any(|(_, x)| x.is_none()) || low.is_empty() {
                Verdict::NotChecked("doppel or occ missing at low skew".into())
            } else {
                Verdict::from_bool(low.iter().all(|(_, x)| x.unwrap_or(0.0) >= 0.95))
            },
        },
        Claim {
            statement: format!("at alpha {high} Doppel is ahead of OCC and splits 1 to 4 keys"),
            paper: "Doppel ahead at high skew, splitting 1-4 keys".into(),
            measured: format!(
                "doppel/occ {}, most keys split at once {}",
                times(r(high)),
                split.map_or("n/a".into(), |x| format!("{x:.0}"))
            ),
            verdict: match (r(high), split) {
                (Some(x), Some(k)) => Verdict::from_bool(x > 1.0 && (1.0..=4.0).contains(&k)),
                _ => Verdict::NotChecked("doppel or occ missing at the highest skew".into()),
            },
        },
    ];
    let mut setup = vec![format!(
        "INCRZ: {keys} keys, each transaction adds 1 to a zipfian key; x = alpha; Doppel's phase \
         length {} ms",
        PHASE.as_millis()
    )];
    setup.extend(common_setup(s, threads));
    Ok(Finish {
        title: "incrz: increments on zipfian keys",
        x_label: "alpha",
        setup,
        paper: PAPER,
        claims,
        columns: &[("records split", "split_records")],
        table: true,
    }
    .artifacts(s, rows))
}
