//! `ramp-ctp`: the RAMP paper's §5.3 — write-only RAMP-F transactions whose COMMIT is dropped with
//! some probability, so cooperative termination must finish them; throughput and whether every
//! write completed.

use phasedb_dist::Algorithm;
use phasedb_dist::ramp::bench::workload::YcsbRamp;

use super::super::claims::{Claim, Verdict, ratio, times};
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::clients::SERVERS;
use super::report::{Finish, tput};
use super::run::{self, CTP_TIMEOUT_MS, Point};

const PAPER: &str = "With 100% RAMP-F write transactions and a share of writes blocked before \
COMMIT, the paper measured throughput relative to no blocked writes: no change at 0.01%, 99.86% \
at 0.1%, 77.53% at 25% and 67.92% at 50%; CTP's commit checks cost network and CPU only for \
blocked writes, so a modest failure rate has a limited effect (§5.3).";

/// Clients of every point.
const CLIENTS: usize = 64;

/// Shares of COMMITs dropped, in percent.
fn drops(s: &Settings) -> Vec<f64> {
    if s.quick {
        vec![0.0, 1.0]
    } else {
        vec![0.0, 0.01, 0.1, 1.0]
    }
}

fn workload(s: &Settings) -> YcsbRamp {
    YcsbRamp {
        items: if s.quick { 10_000 } else { 1_000_000 },
        read_ratio: 0.0,
        ..YcsbRamp::default()
    }
}

fn points(s: &Settings) -> Vec<Point> {
    drops(s)
        .into_iter()
        .map(|pct| Point {
            algorithm: Algorithm::RampFast,
            servers: SERVERS,
            clients: CLIENTS,
            workload: workload(s),
            skip_commit: pct / 100.0,
            params: vec![("dropped_pct".into(), pct.to_string())],
            series: Algorithm::RampFast.name().into(),
            x: pct,
        })
        .collect()
}

fn at(pct: f64) -> [(&'static str, String); 1] {
    [("dropped_pct", pct.to_string())]
}

fn keeps(rows: &[Row], pct: f64, paper: &str) -> Claim {
    let name = Algorithm::RampFast.name();
    let base = tput(rows, name, &at(0.0));
    let with = tput(rows, name, &at(pct));
    let r = base.zip(with).and_then(|(b, w)| ratio(w, b));
    Claim {
        statement: format!(
            "with {pct}% of COMMITs dropped RAMP-F keeps at least 0.95x its throughput"
        ),
        paper: paper.into(),
        measured: format!(
            "{:.0} txn/s with {pct}% dropped vs {:.0} with none: {}",
            with.unwrap_or(0.0),
            base.unwrap_or(0.0),
            times(r)
        ),
        verdict: match r {
            Some(r) => Verdict::from_bool(r >= 0.95),
            None => Verdict::NotChecked(format!("the 0% or {pct}% point did not run")),
        },
    }
}

fn count(r: &Row, key: &str) -> u64 {
    r.param(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// "Every write completes": after the settle time no node holds a prepared transaction, CTP
/// aborted none, and every node reported its counters.
fn completes(rows: &[Row]) -> Claim {
    let dropped: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ok() && r.param("dropped_pct").is_some_and(|p| p != "0"))
        .collect();
    let mut lines = Vec::new();
    let mut ok = true;
    for r in &dropped {
        let (pending, commits, aborts) = (
            count(r, "pending_after"),
            count(r, "ctp_commits"),
            count(r, "ctp_aborts"),
        );
        let (reporting, servers) = (count(r, "nodes_reporting"), count(r, "servers"));
        let all_reported = reporting == servers;
        let writes = count(r, "write_txns") as f64;
        let pct: f64 = r
            .param("dropped_pct")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        ok &= pending == 0 && aborts == 0 && all_reported;
        lines.push(format!(
            "{pct}% dropped: {pending} left prepared, {commits} commits by CTP summed over the \
             servers (about {:.0} COMMITs dropped in the measured window alone, warm-up not \
             counted), {aborts} aborts by CTP, {reporting} of {servers} nodes reporting",
            writes * pct / 100.0
        ));
    }
    Claim {
        statement: "every write whose COMMIT was dropped completes: none is left prepared and CTP aborts none".into(),
        paper: "§4.6: CTP lets servers finish a write whose client failed before COMMIT; as RAMP writers cannot vote to abort, an everywhere-prepared write commits.".into(),
        measured: if lines.is_empty() {
            "no point with dropped COMMITs ran".into()
        } else {
            lines.join("; ")
        },
        verdict: if dropped.is_empty() {
            Verdict::NotChecked("no point with dropped COMMITs ran".into())
        } else {
            Verdict::from_bool(ok)
        },
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    w.validate()?;
    let rows = run::run(s, &points(s));
    let mut claims = Vec::new();
    for (pct, paper) in [
        (
            0.01,
            "§5.3: no change in throughput with 0.01% of writes blocked.",
        ),
        (
            0.1,
            "§5.3: 99.86% of the throughput with 0.1% of writes blocked.",
        ),
    ] {
        if drops(s).contains(&pct) {
            claims.push(keeps(&rows, pct, paper));
        }
    }
    claims.push(completes(&rows));
    let ds: Vec<String> = drops(s).iter().map(|d| format!("{d}%")).collect();
    Ok(Finish {
        title: "ramp-ctp: RAMP-F writes with dropped COMMITs",
        x_label: "COMMITs dropped (%)",
        setup: vec![
            format!(
                "{SERVERS} servers, {CLIENTS} clients, 100% write-only RAMP-F transactions of {} \
                 items over {} items (zipfian theta {})",
                w.ops, w.items, w.theta
            ),
            format!(
                "COMMITs dropped: {}; a dropped COMMIT is never sent, the writer returns at once",
                ds.join(", ")
            ),
            format!(
                "CTP timeout {CTP_TIMEOUT_MS} ms (paper: 5 s); after the clients stop each point \
                 waits {} ms before stopping the servers, which then report what is still prepared",
                8 * CTP_TIMEOUT_MS
            ),
        ],
        paper: PAPER,
        claims,
        varying: &["dropped_pct"],
    }
    .artifacts(s, rows))
}
