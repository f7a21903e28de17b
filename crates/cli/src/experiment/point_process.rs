//! Point processes: a sweep runs each run of a point in a fresh process of this program, as a
//! `phasedb bench` run would, so no point inherits the heap, page tables or caches another point
//! left behind. The child is the same command line plus `--point N`; it runs point N once and
//! prints its [`Outcome`] as one line of JSON on stdout.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::sweep::{Measured, Metrics};

/// The prefix of the line a point process prints its outcome on.
const TAG: &str = "phasedb-point ";

/// What a sweep keeps of one run of a point: enough to judge it and fill its row.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The run's numbers.
    pub metrics: Metrics,
    /// The workload's settings and the run's other figures.
    pub settings: Vec<(String, String)>,
    /// The workload's consistency check.
    pub check: Result<(), String>,
    /// Transactions that failed with an error.
    pub failures: u64,
}

impl Outcome {
    /// The outcome of a run made in this process.
    pub fn of(m: &Measured) -> Outcome {
        Outcome {
            metrics: Metrics::of(&m.result),
            settings: m.settings.clone(),
            check: m.result.check.clone(),
            failures: m.result.stats.total().failures,
        }
    }

    /// The outcome of a run that did not happen, for the row that says why.
    pub fn missing(why: &str) -> Outcome {
        Outcome {
            metrics: Metrics::default(),
            settings: Vec::new(),
            check: Err(why.to_string()),
            failures: 0,
        }
    }

    /// The line a point process prints.
    pub fn line(&self) -> String {
        let m = &self.metrics;
        let v = json!({
            "throughput": m.throughput,
            "abort_rate": m.abort_rate,
            "p50_us": m.p50_us,
            "p99_us": m.p99_us,
            "p999_us": m.p999_us,
            "committed": m.committed,
            "settings": self.settings,
            "check": match &self.check { Ok(()) => Value::Null, Err(e) => json!(e) },
            "failures": self.failures,
        });
        format!("{TAG}{v}")
    }

    /// The outcome in a point process's stdout, with a message if there is none or it is malformed.
    pub fn parse(stdout: &str) -> Result<Outcome, String> {
        let text = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(TAG))
            .ok_or("the point's process printed no outcome")?;
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("the point's process printed a malformed outcome: {e}"))?;
        let bad = |field: &str| format!("the point's process printed no valid `{field}`");
        let f = |field: &str| v[field].as_f64().ok_or_else(|| bad(field));
        let u = |field: &str| v[field].as_u64().ok_or_else(|| bad(field));
        let metrics = Metrics {
            throughput: f("throughput")?,
            abort_rate: f("abort_rate")?,
            p50_us: f("p50_us")?,
            p99_us: f("p99_us")?,
            p999_us: f("p999_us")?,
            committed: u("committed")?,
        };
        let settings = v["settings"]
            .as_array()
            .ok_or_else(|| bad("settings"))?
            .iter()
            .map(|kv| match kv.as_array().map(Vec::as_slice) {
                Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
                _ => Err(bad("settings")),
            })
            .collect::<Result<_, _>>()?;
        let check = match &v["check"] {
            Value::Null => Ok(()),
            Value::String(e) => Err(e.clone()),
            _ => return Err(bad("check")),
        };
        Ok(Outcome {
            metrics,
            settings,
            check,
            failures: u("failures")?,
        })
    }
}

/// Runs point `index` once in a fresh process of this program (this process's arguments plus
/// `--point index`) and returns its outcome; its stderr is this process's.
pub fn run(index: usize) -> Result<Outcome, String> {
    let exe = crate::this_program()
        .map_err(|e| format!("cannot find this program to start the point's process: {e}"))?;
    let out = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .args(["--point", &index.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the point's process: {e}"))?;
    if !out.status.success() {
        return Err(format!("the point's process failed ({})", out.status));
    }
    Outcome::parse(&String::from_utf8_lossy(&out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(check: Result<(), String>) -> Outcome {
        Outcome {
            metrics: Metrics {
                throughput: 3_151_234.567_891,
                abort_rate: 0.024,
                p50_us: 0.7,
                p99_us: 18_629.1,
                p999_us: 19_038.2,
                committed: 6_302_469,
            },
            settings: vec![
                ("split_records".into(), "4".into()),
                ("read_p99_us".into(), "17481.7".into()),
            ],
            check,
            failures: 3,
        }
    }

    #[test]
    fn an_outcome_survives_its_line() {
        for o in [
            outcome(Ok(())),
            outcome(Err("count 7 \"off\"\nby 2".into())),
        ] {
            let stdout = format!("something else\n{}\n", o.line());
            assert_eq!(Outcome::parse(&stdout), Ok(o));
        }
    }

    #[test]
    fn a_missing_or_malformed_outcome_is_an_error() {
        let line = outcome(Ok(())).line();
        let cases = [
            ("", "printed no outcome"),
            ("phasedb-point {", "malformed outcome"),
            ("phasedb-point []", "no valid `throughput`"),
            (
                &line.replace("\"committed\":6302469", "\"committed\":-1"),
                "`committed`",
            ),
            (&line.replace("\"split_records\"", "7"), "`settings`"),
            (&line.replace("\"check\":null", "\"check\":1"), "`check`"),
        ];
        for (stdout, want) in cases {
            let e = Outcome::parse(stdout).expect_err(stdout);
            assert!(e.contains(want), "{stdout:?}: {e}");
        }
    }
}
