//! `star-network`: the STAR paper's §8.6 (Figure 13) — throughput as the network's one-way delay
//! grows from 0.1 to 10 ms, on TPC-C NewOrder + Payment with a 40 ms iteration, for STAR and its
//! baselines with asynchronous replication and a 40 ms group commit. STAR waits for round trips
//! only at phase switches (the replication fence), so it should stay flat until the fences' round
//! trips become a sizeable part of the iteration.

use phasedb_workloads::tpcc::{ProceduresMix, TpccProceduresConfig};
use phasedb_workloads::ycsb::YcsbProceduresConfig;

use super::super::claims::{Claim, Verdict, over, ratio_claim};
use super::super::plot::RightPanel;
use super::super::sweep::Row;
use super::super::{Artifacts, Settings};
use super::contenders::replicating;
use super::report::{Finish, replicas_agree};
use super::run::{self, PARTITIONS, Point, workload_label};
use super::versus::{DISTRIBUTED, PB_OCC, STAR, baselines, baselines_setup, not_measured, row_of};
use crate::cluster::star_workload::StarWorkload;
use phasedb_net::ReplicationSync;

const PAPER: &str = "With NewOrder and Payment alternating, a 40 ms iteration for STAR and 40 ms \
group commits for the others (Figure 13): from 0.1 to 0.5 ms of delay STAR keeps almost the same \
throughput, like the non-partitioned PB-OCC, because it waits for round trips only when it \
switches phases; Dist-OCC with 1 ms of delay keeps only 21.3% of its throughput; at 10 ms STAR \
drops to 32.6% of its throughput (PB-OCC alike) and is still about 200x faster than Dist-OCC and \
Dist-S2PL (§8.6).";

/// Iteration time of every point, ms (the paper's for this experiment).
const ITERATION_MS: f64 = 40.0;
/// Share of cross-partition transactions of every point.
const CROSS_PARTITION: f64 = 0.1;
/// The smallest delay of the sweep: the reference of every ratio, ms.
const BASE_MS: f64 = 0.1;
/// Up to this delay STAR should stay flat, ms.
const FLAT_TO_MS: f64 = 0.5;
/// The largest delay of the sweep, ms.
const LARGEST_MS: f64 = 10.0;
/// The delay at which the paper measured Dist-OCC's loss, ms.
const DIST_AT_MS: f64 = 1.0;
/// Dist-OCC should keep at most this share of its throughput at [`DIST_AT_MS`] (paper: 21.3%).
const DIST_KEEPS_AT_MOST: f64 = 0.5;
/// STAR over each Dist-* baseline at [`LARGEST_MS`] (paper: about 200x).
const FAR_AHEAD: f64 = 10.0;

/// One-way delays of the sweep, ms (the paper's: 0.1 to 10).
fn delays(s: &Settings) -> Vec<f64> {
    if s.quick {
        // A quick window spans a few iterations only: at 10 ms of delay it may hold no release.
        vec![BASE_MS, FLAT_TO_MS, 2.0]
    } else {
        vec![BASE_MS, 0.2, FLAT_TO_MS, 1.0, 2.0, 5.0, LARGEST_MS]
    }
}

/// NewOrder + Payment as in the paper; `--quick` runs YCSB on tiny data instead, so that the
/// test of the experiment loads no TPC-C warehouses.
fn workload(s: &Settings) -> StarWorkload {
    if s.quick {
        StarWorkload::Ycsb(YcsbProceduresConfig {
            rows_per_partition: 1_000,
            ..YcsbProceduresConfig::star(PARTITIONS)
        })
    } else {
        StarWorkload::Tpcc(TpccProceduresConfig {
            warehouses: PARTITIONS,
            mix: ProceduresMix::NewOrderPayment,
            fine: false,
        })
    }
}

/// STAR and the baselines with asynchronous replication (Figure 13 compares those).
fn points(s: &Settings) -> Vec<Point> {
    let w = workload(s);
    let mut out = Vec::new();
    for c in replicating(s, ReplicationSync::Async) {
        for ms in delays(s) {
            out.push(Point {
                contender: c,
                params: vec![
                    ("algorithm".into(), c.algorithm_name().into()),
                    ("replication".into(), c.replication_name().into()),
                    ("workload".into(), workload_label(&w).into()),
                    ("delay_ms".into(), ms.to_string()),
                    ("iteration_ms".into(), ITERATION_MS.to_string()),
                    ("cross_pct".into(), (CROSS_PARTITION * 100.0).to_string()),
                ],
                series: c.label(),
                x: ms,
                workload: w.clone(),
                iteration_ms: ITERATION_MS,
                hybrid: false,
                cross_partition: CROSS_PARTITION,
                delay_us: (ms * 1e3).round() as u64,
            });
        }
    }
    out
}

fn throughput_at(rows: &[Row], algorithm: &str, ms: f64) -> Option<f64> {
    row_of(rows, algorithm, "async", &[("delay_ms", &ms.to_string())]).map(|r| r.metrics.throughput)
}

/// Throughput of `algorithm` at `ms` over its throughput at [`BASE_MS`].
fn kept(rows: &[Row], algorithm: &str, ms: f64) -> Option<f64> {
    over(
        throughput_at(rows, algorithm, ms),
        throughput_at(rows, algorithm, BASE_MS),
    )
}

/// STAR, and PB-OCC where measured: the lines the paper finds alike (§8.6).
fn star_and_pb_occ(rows: &[Row]) -> Vec<&'static str> {
    let mut out = vec![STAR];
    if baselines(rows, "async").iter().any(|b| b == PB_OCC) {
        out.push(PB_OCC);
    }
    out
}

/// Adds `of_base_pct` to every row that counted: its throughput over its line's at the smallest
/// delay, in percent (the paper's "of its original throughput").
fn add_of_base(rows: &mut [Row]) {
    let key = |r: &Row| {
        (
            r.param("algorithm").map(str::to_string),
            r.param("replication").map(str::to_string),
        )
    };
    let bases: Vec<(_, f64)> = rows
        .iter()
        .filter(|r| r.ok() && r.x == BASE_MS)
        .map(|r| (key(r), r.metrics.throughput))
        .collect();
    for r in rows.iter_mut().filter(|r| r.ok()) {
        let k = key(r);
        let base = bases.iter().find(|(b, _)| *b == k);
        if let Some((_, t)) = base
            && *t > 0.0
        {
            let pct = r.metrics.throughput / t * 100.0;
            r.params.push(("of_base_pct".into(), format!("{pct:.1}")));
        }
    }
}

/// "Almost the same throughput from 0.1 to 0.5 ms", STAR like PB-OCC.
fn flat_to_half_ms(rows: &[Row]) -> Claim {
    let ratios: Vec<(String, Option<f64>)> = star_and_pb_occ(rows)
        .into_iter()
        .map(|a| (a.to_string(), kept(rows, a, FLAT_TO_MS)))
        .collect();
    ratio_claim(
        &format!(
            "STAR keeps its throughput up to {FLAT_TO_MS} ms of delay, like PB-OCC (where \
             measured): at least 0.9x its throughput at {BASE_MS} ms"
        ),
        "§8.6: when the delay grows from 0.1 ms to 0.5 ms STAR has almost the same throughput, \
         as the phase-switching overhead is still small, and so has the non-partitioned PB. OCC.",
        &format!("throughput at {FLAT_TO_MS} ms / at {BASE_MS} ms"),
        &ratios,
        0.9..=f64::MAX,
    )
}

/// "At 10 ms STAR drops to 32.6% of its throughput", PB-OCC alike.
fn about_a_third_at_10_ms(rows: &[Row]) -> Claim {
    let ratios: Vec<(String, Option<f64>)> = star_and_pb_occ(rows)
        .into_iter()
        .map(|a| (a.to_string(), kept(rows, a, LARGEST_MS)))
        .collect();
    ratio_claim(
        &format!(
            "at {LARGEST_MS} ms of delay STAR keeps about a third of its throughput, like PB-OCC \
             (where measured): 0.2x-0.5x its throughput at {BASE_MS} ms"
        ),
        "§8.6: when the delay is 10 ms, the throughput of STAR drops to 32.6% of its original \
         throughput, the fences' round trips being no longer negligible against a 40 ms \
         iteration; PB. OCC's likewise.",
        &format!("throughput at {LARGEST_MS} ms / at {BASE_MS} ms"),
        &ratios,
        0.2..=0.5,
    )
}

/// The claims about Dist-OCC and Dist-S2PL, from their rows: each keeps at most
/// [`DIST_KEEPS_AT_MOST`] of its throughput at 1 ms, and STAR is at least [`FAR_AHEAD`]x each at
/// 10 ms.
fn distributed_baselines(rows: &[Row]) -> Claim {
    let statement = format!(
        "Dist-OCC keeps about a fifth of its throughput at {DIST_AT_MS} ms of delay (at most \
         {DIST_KEEPS_AT_MOST}x, Dist-S2PL likewise), and at {LARGEST_MS} ms STAR is far ahead of \
         both (at least {FAR_AHEAD}x)"
    );
    let paper = "§8.6: the throughput of Dist. OCC with a 1 ms network delay is only 21.3% of its \
                 original throughput; at 10 ms STAR is about 200x faster than Dist. OCC and \
                 Dist. S2PL.";
    let present: Vec<String> = baselines(rows, "async")
        .into_iter()
        .filter(|b| DISTRIBUTED.contains(&b.as_str()))
        .collect();
    if present.is_empty() {
        return Claim {
            statement,
            paper: paper.into(),
            measured: format!("STAR and PB-OCC only{}", not_measured(&[], &DISTRIBUTED)),
            verdict: Verdict::NotChecked("Dist-OCC and Dist-S2PL not measured".into()),
        };
    }
    let keeps: Vec<(String, Option<f64>)> = present
        .iter()
        .map(|d| (d.clone(), kept(rows, d, DIST_AT_MS)))
        .collect();
    let ahead: Vec<(String, Option<f64>)> = present
        .iter()
        .map(|d| {
            let r = over(
                throughput_at(rows, STAR, LARGEST_MS),
                throughput_at(rows, d, LARGEST_MS),
            );
            (format!("STAR over {d}"), r)
        })
        .collect();
    let keep = ratio_claim(
        "",
        "",
        &format!("throughput at {DIST_AT_MS} ms / at {BASE_MS} ms"),
        &keeps,
        0.0..=DIST_KEEPS_AT_MOST,
    );
    let far = ratio_claim(
        "",
        "",
        &format!("at {LARGEST_MS} ms"),
        &ahead,
        FAR_AHEAD..=f64::MAX,
    );
    let verdict = match (&keep.verdict, &far.verdict) {
        (Verdict::NotChecked(why), _) | (_, Verdict::NotChecked(why)) => {
            Verdict::NotChecked(why.clone())
        }
        (a, b) => Verdict::from_bool(*a == Verdict::Holds && *b == Verdict::Holds),
    };
    Claim {
        statement,
        paper: paper.into(),
        measured: format!(
            "{}; {}{}",
            keep.measured,
            far.measured,
            not_measured(&present, &DISTRIBUTED)
        ),
        verdict,
    }
}

/// Runs the experiment.
pub fn run(s: &Settings) -> Result<Artifacts, String> {
    let w = workload(s);
    if let StarWorkload::Ycsb(c) = &w {
        c.validate()?;
    }
    let mut rows = run::run(s, &points(s));
    add_of_base(&mut rows);
    let claims = vec![
        flat_to_half_ms(&rows),
        about_a_third_at_10_ms(&rows),
        distributed_baselines(&rows),
        replicas_agree(&rows),
    ];
    let described = match &w {
        StarWorkload::Tpcc(c) => format!(
            "TPC-C NewOrder + Payment alternating ({} warehouses, one per partition)",
            c.warehouses
        ),
        StarWorkload::Ycsb(c) => format!(
            "YCSB in STAR's shape on {} rows per partition (--quick; the paper's workload is \
             TPC-C NewOrder + Payment)",
            c.rows_per_partition
        ),
    };
    Ok(Finish {
        title: "star-network: throughput against the network's one-way delay",
        x_label: "one-way delay (ms)",
        setup: vec![
            format!(
                "{described}, {:.0}% cross-partition transactions, a {ITERATION_MS} ms iteration \
                 for STAR and a {ITERATION_MS} ms group commit for the baselines (the paper's for \
                 this experiment), asynchronous replication",
                CROSS_PARTITION * 100.0
            ),
            format!(
                "every node holds each message it sends back by the delay before writing it \
                 (`[net] delay_us`), so a round trip costs twice the delay; delays (ms): {}",
                delays(s)
                    .iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ]
        .into_iter()
        .chain(baselines_setup(&rows))
        .collect(),
        paper: PAPER,
        claims,
        varying: &["algorithm", "replication", "delay_ms"],
        columns: &[("of 0.1 ms", "of_base_pct")],
        color_by: "algorithm",
        dashed: None,
        right: RightPanel::Param {
            param: "of_base_pct",
            caption: "Throughput against the smallest delay",
            y_label: "of the throughput at 0.1 ms (%)",
        },
    }
    .artifacts(s, rows))
}

#[cfg(test)]
mod tests {
    use super::super::super::claims::Verdict;
    use super::super::report::fake;
    use super::*;

    fn sweep(tputs: &[(f64, f64)]) -> Vec<Row> {
        line("star", tputs)
    }

    /// Rows of `algorithm` with asynchronous replication, one per `(delay, throughput)`.
    fn line(algorithm: &str, tputs: &[(f64, f64)]) -> Vec<Row> {
        let at = [("algorithm", algorithm), ("replication", "async")];
        fake::series(&at, "delay_ms", tputs)
    }

    #[test]
    fn the_claims_follow_the_papers_figures() {
        let paper = sweep(&[(0.1, 100.0), (0.5, 98.0), (1.0, 90.0), (10.0, 32.6)]);
        assert_eq!(flat_to_half_ms(&paper).verdict, Verdict::Holds);
        assert_eq!(about_a_third_at_10_ms(&paper).verdict, Verdict::Holds);
        let fragile = sweep(&[(0.1, 100.0), (0.5, 60.0), (10.0, 5.0)]);
        assert_eq!(flat_to_half_ms(&fragile).verdict, Verdict::DoesNotHold);
        assert_eq!(
            about_a_third_at_10_ms(&fragile).verdict,
            Verdict::DoesNotHold
        );
        let missing = sweep(&[(0.1, 100.0)]);
        assert!(matches!(
            flat_to_half_ms(&missing).verdict,
            Verdict::NotChecked(_)
        ));
        assert!(matches!(
            distributed_baselines(&paper).verdict,
            Verdict::NotChecked(_)
        ));
    }

    #[test]
    fn the_baselines_join_the_claims_from_their_rows() {
        let mut rows = sweep(&[(0.1, 100.0), (0.5, 98.0), (1.0, 90.0), (10.0, 32.6)]);
        rows.extend(line(
            "pb-occ",
            &[(0.1, 80.0), (0.5, 79.0), (1.0, 75.0), (10.0, 30.0)],
        ));
        assert_eq!(flat_to_half_ms(&rows).verdict, Verdict::Holds);
        assert!(flat_to_half_ms(&rows).measured.contains("pb-occ 0.99x"));
        assert!(matches!(
            distributed_baselines(&rows).verdict,
            Verdict::NotChecked(_)
        ));
        let mut with_dist = rows.clone();
        for d in DISTRIBUTED {
            with_dist.extend(line(d, &[(0.1, 50.0), (1.0, 10.7), (10.0, 0.16)]));
        }
        let c = distributed_baselines(&with_dist);
        assert_eq!(c.verdict, Verdict::Holds, "{}", c.measured);
        let mut slow_pb = rows;
        slow_pb.extend(line("dist-occ", &[(0.1, 50.0), (1.0, 45.0), (10.0, 30.0)]));
        let last = slow_pb.len() - 1;
        assert_eq!(
            distributed_baselines(&slow_pb).verdict,
            Verdict::DoesNotHold
        );
        assert!(
            distributed_baselines(&slow_pb)
                .measured
                .contains("not measured (not built into this experiment): dist-s2pl")
        );
        slow_pb[last].applicable = Err("node exited".into());
        assert!(matches!(
            distributed_baselines(&slow_pb).verdict,
            Verdict::NotChecked(_)
        ));
    }

    #[test]
    fn each_point_is_compared_with_the_smallest_delay() {
        let mut rows = sweep(&[(0.1, 200.0), (1.0, 150.0), (10.0, 50.0)]);
        add_of_base(&mut rows);
        let pct: Vec<&str> = rows
            .iter()
            .map(|r| r.param("of_base_pct").unwrap())
            .collect();
        assert_eq!(pct, ["100.0", "75.0", "25.0"]);
    }
}
