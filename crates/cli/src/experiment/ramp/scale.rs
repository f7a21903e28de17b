//! `ramp-scale`: the RAMP paper's Figure 4 — uniform access, x = servers.

use phasedb_dist::Algorithm;
use phasedb_dist::ramp::bench::workload::YcsbRamp;

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::report::{BASELINE, Finish, over, ratio_claim, tput};
use super::run::{self, Point};

const PAPER: &str = "With uniform access to items (to avoid hot items while scaling), every RAMP \
algorithm scales linearly to 100 servers: RAMP-F reaches about 7.1M operations/s; at every scale \
RAMP-F stays within 10% of NWNR (within 2.6% at 100 servers), RAMP-H within 3.4% and RAMP-S within \
45% (Figure 4).";

/// Clients per server.
const CLIENTS_PER_SERVER: usize = 64;

fn server_counts(s: &Settings) -> Vec<usize> {
    if s.quick {
        vec![1, 2]
    } else {
        vec![1, 2, 3, 4]
    }
}

const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::RampFast,
    Algorithm::RampSmall,
    Algorithm::RampHybrid,
    Algorithm::Nwnr,
];

fn workload(s: &Settings) -> YcsbRamp {
    YcsbRamp {
        items: if s.quick { 10_000 } else { 1_000_000 },
        theta: 0.0,
        ..YcsbRamp::default()
    }
}

fn points(s: &Settings) -> Vec<Point> {
    let mut out = Vec::new();
    for servers in server_counts(s) {
        for algorithm in ALGORITHMS.into_iter().filter(|a| s.algorithms.contains(a)) {
            out.push(Point {
                algorithm,
                servers,
                clients: CLIENTS_PER_SERVER * servers,
                workload: workload(s),
                skip_commit: 0.0,
                params: Vec::new(),
                series: algorithm.name().into(),
                x: servers as f64,
            });
        }
    }
    out
}

fn at(servers: usize) -> [(&'static str, String); 1] {
    [("servers", servers.to_string())]
}

/// "Scales linearly": throughput at n servers is at least 0.8 × n × one server's.
fn linear(rows: &[Row], counts: &[usize], cores: usize) -> Claim {
    let name = Algorithm::RampFast.name();
    let one = tput(rows, name, &at(1));
    let effs: Vec<(usize, Option<f64>)> = counts
        .iter()
        .filter(|&&n| n > 1)
        .map(|&n| (n, over(tput(rows, name, &at(n)), one).map(|r| r / n as f64)))
        .collect();
    let measured = format!(
        "RAMP-F throughput at n servers / (n × at 1 server): {}",
        effs.iter()
            .map(|(n, e)| format!("{n} servers {}", times(*e)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let verdict = if effs.is_empty() || effs.iter().any(|(_, e)| e.is_none()) {
        Verdict::NotChecked("RAMP-F did not run at one and several servers".into())
    } else {
        Verdict::from_bool(effs.iter().all(|(_, e)| e.is_some_and(|e| e >= 0.8)))
    };
    Claim {
        statement:
            "RAMP-F scales linearly: at n servers at least 0.8 × n × its one-server throughput"
                .into(),
        paper: format!(
            "Figure 4: each RAMP algorithm scales linearly to 100 servers. Here every server and \
             the clients share {cores} cores, so adding servers adds no hardware."
        ),
        measured,
        verdict,
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    w.validate()?;
    let rows = run::run(s, &points(s));
    let counts = server_counts(s);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let within: Vec<(String, Option<f64>)> = counts
        .iter()
        .map(|&n| {
            let r = tput(rows.as_slice(), Algorithm::RampFast.name(), &at(n))
                .zip(tput(&rows, BASELINE, &at(n)))
                .and_then(|(a, b)| ratio(a, b));
            (format!("{n} servers"), r)
        })
        .collect();
    let claims = vec![
        linear(&rows, &counts, cores),
        ratio_claim(
            "at every scale RAMP-F stays within 10% of NWNR (at least 0.9x)",
            "Figure 4: at all scales RAMP-F throughput was always within 10% of NWNR.",
            "RAMP-F throughput / NWNR's",
            &within,
            0.9..=f64::MAX,
        ),
    ];
    let ns: Vec<String> = counts.iter().map(usize::to_string).collect();
    Ok(Finish {
        title: "ramp-scale: uniform access against the number of servers",
        x_label: "servers",
        setup: vec![
            format!(
                "servers: {} (paper: up to 100 machines), {CLIENTS_PER_SERVER} clients per server; \
                 uniform access to {} items, {} items per transaction, {:.0}% read-only, {}-byte values",
                ns.join(", "),
                w.items,
                w.ops,
                w.read_ratio * 100.0,
                w.value_size
            ),
            format!(
                "algorithms: {}",
                ALGORITHMS.map(|a| a.name()).join(", ")
            ),
        ],
        paper: PAPER,
        claims,
        varying: &["servers"],
    }
    .artifacts(s, rows))
}
