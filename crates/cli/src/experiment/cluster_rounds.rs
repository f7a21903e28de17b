//! The round schedule of the cluster experiments (RAMP, STAR): every point runs once per round, so
//! the points a verdict compares alternate, and rounds after the first run the points in a shuffled
//! order, because a cluster run can be slowed by the one before it (`bench ycsb --cluster 2
//! --clients 256`: runs right after an E-PCI run measured 0.57-0.66M txn/s for RAMP-F and 0.60-0.67M
//! for NWNR, other runs 0.61-0.80M), and in a fixed order the same algorithm would always follow the
//! same one.

use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

use super::settings::Settings;

/// What became of one point over the rounds: its finished runs, and the error of the run that
/// failed (after which the point is not run again).
pub struct PointRuns<R> {
    /// Runs in the order they finished.
    pub runs: Vec<R>,
    /// Why the point stopped, if a run failed.
    pub failure: Option<String>,
}

/// How a kind of cluster point is run and shown on stderr.
pub trait ClusterPoint {
    /// A finished run.
    type Run;
    /// The point as one line (`key=value ...`).
    fn describe(&self) -> String;
    /// Runs the point once.
    fn run_once(&self, s: &Settings) -> Result<Self::Run, String>;
    /// The figures of a finished run for the progress line.
    fn summary(run: &Self::Run) -> String;
}

/// Runs every point `s.runs` times, round by round, after one unrecorded warm-up run of the first
/// point (unless `--quick`): the first cluster run after the machine sat idle measures low (on the
/// 2-core VM, three identical 1 s NWNR write runs after 25 s idle: 162K, 218K and 240K txn/s;
/// `ramp-ctp`'s first point 127-129K against 194-217K later), which would bias round one.
pub fn run_rounds<P: ClusterPoint>(s: &Settings, points: &[P]) -> Vec<PointRuns<P::Run>> {
    let started = Instant::now();
    let rounds = s.runs.max(1);
    let total = points.len() * rounds;
    let mut out: Vec<PointRuns<P::Run>> = points
        .iter()
        .map(|_| PointRuns {
            runs: Vec::new(),
            failure: None,
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(s.seed);
    if let Some(first) = points.first().filter(|_| !s.quick) {
        eprintln!("[warm-up, not recorded] {}: {}", s.name, first.describe());
        if let Err(e) = first.run_once(s) {
            eprintln!("        failed: {e}");
        }
    }
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..points.len()).collect();
        if round > 0 {
            order.shuffle(&mut rng);
        }
        for (k, &i) in order.iter().enumerate() {
            if out[i].failure.is_some() {
                continue;
            }
            let n = round * points.len() + k + 1;
            eprintln!("[{n}/{total}] {}: {}", s.name, points[i].describe());
            match points[i].run_once(s) {
                Ok(run) => {
                    let per = started.elapsed().as_secs_f64() / n as f64;
                    eprintln!(
                        "        {}, about {:.0} s left",
                        P::summary(&run),
                        per * (total - n) as f64
                    );
                    out[i].runs.push(run);
                }
                Err(e) => {
                    eprintln!("        failed: {e}");
                    out[i].failure = Some(e);
                }
            }
        }
    }
    out
}

/// The report's setup line for [`run_rounds`]'s schedule.
pub fn schedule_line(s: &Settings) -> String {
    let runs = if s.runs > 1 {
        format!(
            "{} rounds over all points (so compared points alternate; the rounds after the first \
             in a shuffled order), the run of median throughput reported",
            s.runs
        )
    } else {
        "one run per point".to_string()
    };
    let warm_up = if s.quick {
        ""
    } else {
        "; one unrecorded run of the first point first, as a machine that sat idle measures its \
         first run low"
    };
    s.point_line(&format!("{runs}{warm_up}"))
}
