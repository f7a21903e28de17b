//! `like`: the LIKE application at a growing share of write transactions, Doppel against OCC.

use phasedb_workloads::like::{Like, LikeConfig};

use super::super::claims::{Claim, Verdict, ratio, spread, times};
use super::super::{Artifacts, Settings};
use super::{Finish, PHASE, at, common_setup, measure, num, options, point, protocols, sweep};

const PAPER: &str = "With 1M users and 1M pages chosen with zipf alpha 1.4, OCC is best when \
transactions are mostly reads; from about 30% writes Doppel splits the popular pages' counts and \
is best from there on, since reads of split pages wait for joined phases (Figure 12).";

/// The LIKE settings of the Doppel experiments at `write_ratio` and skew `alpha`.
pub fn config(s: &Settings, alpha: f64, write_ratio: f64) -> LikeConfig {
    let n = if s.quick { 10_000 } else { 1_000_000 };
    LikeConfig {
        users: n,
        pages: n,
        alpha,
        write_ratio,
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let writes: &[f64] = if s.quick {
        &[0.1, 0.5]
    } else {
        &[0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    };
    let threads = s.threads_max();
    let mut points = Vec::new();
    for &w in writes {
        for p in protocols(s, &["doppel", "occ"]) {
            let cfg = config(s, 1.4, w);
            cfg.validate()?;
            let opts = options(s, threads, PHASE);
            let p2 = p.clone();
            points.push(point(
                &p,
                w * 100.0,
                vec![("write_pct", format!("{}", w * 100.0))],
                move || measure(&p2, Like::new(cfg.clone()), &opts),
            ));
        }
    }
    let rows = sweep(s, points);
    let r = |w: f64| {
        at(&rows, "doppel", w)
            .zip(at(&rows, "occ", w))
            .and_then(|(d, o)| ratio(d.metrics.throughput, o.metrics.throughput))
    };
    let split50 = at(&rows, "doppel", 50.0).and_then(|d| num(d, "split_records"));
    let rounds50 = at(&rows, "doppel", 50.0)
        .zip(at(&rows, "occ", 50.0))
        .map_or_else(Vec::new, |(d, o)| d.round_ratios(o));
    let heavy: Vec<(f64, Option<f64>)> = writes
        .iter()
        .filter(|&&w| w >= 0.5)
        .map(|&w| (w * 100.0, r(w * 100.0)))
        .collect();
    let claims = vec![
        Claim {
            statement: "at 50% writes Doppel splits the hot pages and is not below OCC".into(),
            paper: "Doppel splits from ~30% writes and is best after; the Go original split no \
                    key at 2 workers"
                .into(),
            measured: format!(
                "doppel/occ at 50% writes {}{}, most pages split at once {}",
                times(r(50.0)),
                spread(&rounds50),
                split50.map_or("n/a".into(), |x| format!("{x:.0}"))
            ),
            verdict: match (r(50.0), split50) {
                (Some(x), Some(k)) => Verdict::from_bool(x >= 1.0 && k >= 1.0),
                _ => Verdict::NotChecked("doppel or occ missing at 50% writes".into()),
            },
        },
        Claim {
            statement: "from 50% writes up, Doppel is not below OCC".into(),
            paper: "Doppel best once writes dominate".into(),
            measured: heavy
                .iter()
                .map(|(w, x)| format!("{w:.0}% writes: {}", times(*x)))
                .collect::<Vec<_>>()
                .join(", "),
            verdict: if heavy.is_empty() || heavy.iter().any(|(_, x)| x.is_none()) {
                Verdict::NotChecked("doppel or occ missing".into())
            } else {
                Verdict::from_bool(heavy.iter().all(|(_, x)| x.unwrap_or(0.0) >= 1.0))
            },
        },
    ];
    let c = config(s, 1.4, 0.5);
    let mut setup = vec![format!(
        "LIKE: {} users, {} pages chosen with zipf alpha 1.4; a write adds 1 to the page's count \
         and updates the user's row, a read reads both; x = % write transactions; Doppel's phase \
         length {} ms",
        c.users,
        c.pages,
        PHASE.as_millis()
    )];
    setup.extend(common_setup(s, threads));
    Ok(Finish {
        title: "like: likes on popular pages",
        x_label: "% write transactions",
        setup,
        paper: PAPER,
        claims,
        columns: &[
            ("read p99 µs", "read_p99_us"),
            ("write p99 µs", "write_p99_us"),
            ("pages split", "split_records"),
        ],
        table: true,
    }
    .artifacts(s, rows))
}
