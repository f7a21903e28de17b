//! The settings of one experiment run, resolved from the command line.

use std::path::PathBuf;
use std::time::Duration;

use super::ExperimentArgs;
use super::protocols::{self, Protocol};
use super::sweep::Placement;
use phasedb_dist::Algorithm;

/// How to run an experiment: where to write, how long each point runs, which thread counts.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The experiment's name.
    pub name: &'static str,
    /// Output directory.
    pub out: PathBuf,
    /// Measured window per point.
    pub duration: Duration,
    /// Warm-up per point.
    pub warmup: Duration,
    /// Thread counts of thread sweeps, ascending.
    pub threads: Vec<usize>,
    /// Tiny data and short points.
    pub quick: bool,
    /// Seed of the transaction generators.
    pub seed: u64,
    /// Runs per point, in rounds (every point once per round); the run of median throughput is reported.
    pub runs: usize,
    /// The protocols to compare.
    pub protocols: Vec<Protocol>,
    /// The distributed algorithms the cluster experiments may run (all unless `--protocols` names
    /// some of them).
    pub algorithms: Vec<Algorithm>,
    /// Where the sweep runs its points.
    pub placement: Placement,
    /// The machine's 1-minute load average when the run started (Linux), a hint of how much other
    /// processes competed for the cores.
    pub load_before: Option<f64>,
}

/// The 1-minute load average from `/proc/loadavg`, where there is one.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn seconds(flag: &str, value: Option<f64>, default: f64) -> Result<Duration, String> {
    let v = value.unwrap_or(default);
    if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
        return Err(format!(
            "{flag} must be a number of seconds between 0 and 86400"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// Thread counts from 1 to `max`: every count up to 8, then doubling, always ending at `max`.
pub fn thread_counts(max: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = (1..=max.min(8)).collect();
    let mut t = 16;
    while t < max {
        counts.push(t);
        t *= 2;
    }
    if *counts.last().expect("max >= 1") != max {
        counts.push(max);
    }
    counts
}

impl Settings {
    /// Resolves the settings of experiment `name` from `args`, with a message on bad flags.
    pub fn resolve(name: &'static str, args: &ExperimentArgs) -> Result<Settings, String> {
        let (duration, warmup) = if args.quick { (0.1, 0.05) } else { (2.0, 0.5) };
        let duration = seconds("--duration", args.duration, duration)?;
        let warmup = seconds("--warmup", args.warmup, warmup)?;
        if duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        if args.runs == 0 || args.runs > 100 {
            return Err("--runs must be between 1 and 100".into());
        }
        let all = protocols::all();
        // The cluster experiments compare distributed algorithms; the others, single-node protocols.
        let cluster = name.starts_with("ramp-");
        let star = name.starts_with("star-");
        if (cluster || star) && (args.in_process || args.point.is_some()) {
            return Err(format!(
                "--in-process and --point are for single-node experiments; {name} runs each \
                 point on a cluster of phasedb node processes"
            ));
        }
        if star && args.protocols.is_some() {
            return Err(format!(
                "--protocols does not apply to {name}: it runs STAR and the baselines this build has"
            ));
        }
        let (mut protocols, mut algorithms) = (all.clone(), Algorithm::ALL.to_vec());
        if let Some(names) = &args.protocols {
            let unknown = |n: &str, known: Vec<&str>| {
                format!(
                    "unknown {} `{n}` in --protocols for {name} (this build has: {})",
                    if cluster { "algorithm" } else { "protocol" },
                    known.join(", ")
                )
            };
            if cluster {
                algorithms = names
                    .iter()
                    .map(|n| {
                        Algorithm::parse(n).ok_or_else(|| {
                            unknown(n, Algorithm::ALL.iter().map(|a| a.name()).collect())
                        })
                    })
                    .collect::<Result<_, _>>()?;
            } else {
                protocols = names
                    .iter()
                    .map(|n| {
                        all.iter().find(|p| p.name == *n).cloned().ok_or_else(|| {
                            unknown(n, all.iter().map(|p| p.name.as_str()).collect())
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let max = args.threads_max.unwrap_or(cores);
        if max == 0 || max > phasedb_txn::MAX_WORKERS {
            return Err(format!(
                "--threads-max must be between 1 and {}",
                phasedb_txn::MAX_WORKERS
            ));
        }
        let max = if args.quick && args.threads_max.is_none() {
            max.min(2)
        } else {
            max
        };
        Ok(Settings {
            name,
            out: args
                .out
                .clone()
                .unwrap_or_else(|| PathBuf::from("results").join(name)),
            duration,
            warmup,
            threads: thread_counts(max),
            quick: args.quick,
            seed: args.seed,
            runs: args.runs,
            protocols,
            algorithms,
            placement: match (args.point, args.in_process) {
                (Some(i), _) => Placement::Point(i),
                (None, true) => Placement::InProcess,
                (None, false) => Placement::OwnProcess,
            },
            load_before: load_average(),
        })
    }

    /// "a machine with N cores", with the load average when the run started: the line every report
    /// gives about the hardware the points shared.
    pub fn machine(&self) -> String {
        format!(
            "a machine with {} cores{}",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            self.load_before.map_or(String::new(), |l| format!(
                " (1-minute load average {l:.2} when the run started: other processes share the cores)"
            ))
        )
    }

    /// "each point: warm-up, measured window, seed; `runs`", flagged when `--quick`: the line every
    /// report gives about how its points were run.
    pub fn point_line(&self, runs: &str) -> String {
        format!(
            "each point: {:.2} s warm-up, {:.2} s measured, seed {}; {runs}{}",
            self.warmup.as_secs_f64(),
            self.duration.as_secs_f64(),
            self.seed,
            if self.quick {
                " (--quick: a tiny version, numbers not meaningful)"
            } else {
                ""
            }
        )
    }

    /// Where a sweep runs its points and how a point's several runs are reduced to one, for
    /// [`Settings::point_line`].
    pub fn sweep_runs(&self) -> String {
        let runs = if self.runs > 1 {
            format!(
                "median throughput of {} runs per point, run in rounds over every point",
                self.runs
            )
        } else {
            "one run per point".to_string()
        };
        match self.placement {
            Placement::InProcess => format!("{runs}, all in one process (--in-process)"),
            _ => format!("{runs}, each run in a fresh process"),
        }
    }

    /// The largest thread count of the sweep.
    pub fn threads_max(&self) -> usize {
        *self.threads.last().expect("at least one thread count")
    }
}

#[cfg(test)]
mod tests {
    use super::thread_counts;

    #[test]
    fn thread_counts_end_at_the_maximum() {
        assert_eq!(thread_counts(1), vec![1]);
        assert_eq!(thread_counts(2), vec![1, 2]);
        assert_eq!(thread_counts(8), (1..=8).collect::<Vec<_>>());
        assert_eq!(thread_counts(40), vec![1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 40]);
        assert_eq!(thread_counts(64), vec![1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64]);
    }
}
