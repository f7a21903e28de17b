//! Lookups for the claims that set STAR beside its baselines: which baselines a run measured, the
//! row of one contender at a point, and the setup line that says how the baselines ran. Claims take
//! the baselines from the rows, so a baseline added to [`super::contenders::CONTENDERS`] is checked
//! without changing them.

use super::super::sweep::Row;
use super::report::find;
use super::run::NODES;

/// STAR's name in the `algorithm` column.
pub const STAR: &str = "star";
/// PB-OCC's name in the `algorithm` column.
pub const PB_OCC: &str = "pb-occ";
/// The partitioning-based baselines' names (§8.1.2): Dist-OCC and Dist-S2PL.
pub const DISTRIBUTED: [&str; 2] = ["dist-occ", "dist-s2pl"];

/// The baselines (every algorithm but STAR) with rows replicating as `replication` ("async" or
/// "sync"), counted or not, in row order.
pub fn baselines(rows: &[Row], replication: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if let (Some(a), Some(rep)) = (r.param("algorithm"), r.param("replication"))
            && a != STAR
            && rep == replication
            && !out.iter().any(|o| o == a)
        {
            out.push(a.to_string());
        }
    }
    out
}

/// The partitioning-based baselines among [`baselines`].
pub fn distributed(rows: &[Row], replication: &str) -> Vec<String> {
    baselines(rows, replication)
        .into_iter()
        .filter(|a| DISTRIBUTED.contains(&a.as_str()))
        .collect()
}

/// The row that counted of `algorithm` replicating as `replication` (STAR: "async") at `at`.
pub fn row_of<'r>(
    rows: &'r [Row],
    algorithm: &str,
    replication: &str,
    at: &[(&str, &str)],
) -> Option<&'r Row> {
    let mut all = vec![("algorithm", algorithm), ("replication", replication)];
    all.extend_from_slice(at);
    find(rows, &all)
}

/// STAR's row that counted at `at`.
pub fn star_at<'r>(rows: &'r [Row], at: &[(&str, &str)]) -> Option<&'r Row> {
    row_of(rows, STAR, "async", at)
}

/// "; not measured: dist-occ, dist-s2pl" for the names of `wanted` that `present` lacks, or
/// nothing.
pub fn not_measured(present: &[String], wanted: &[&str]) -> String {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !present.iter().any(|p| p == w))
        .collect();
    if missing.is_empty() {
        String::new()
    } else {
        format!(
            "; not measured (not built into this experiment): {}",
            missing.join(", ")
        )
    }
}

/// The setup line of an experiment with baseline rows: how they ran on the same nodes.
pub fn baselines_setup(rows: &[Row]) -> Option<String> {
    let mut names: Vec<String> = baselines(rows, "async");
    for s in baselines(rows, "sync") {
        if !names.contains(&s) {
            names.push(s);
        }
    }
    if names.is_empty() {
        return None;
    }
    Some(format!(
        "baselines (§8.1.2) on the same `phasedb node` processes, engine, transport and workload: \
         {}; PB-OCC runs every transaction on node 0 (the primary) with Silo's OCC and replicates \
         to node 1, its backup ({NODES} full replicas); \"async\" replicates asynchronously and \
         releases results at a group commit every iteration time, once the writes before it are \
         on every replica, \"sync\" holds write locks until the replicas acknowledged (§8.1.3); \
         STAR runs value replication in both phases here, as the paper's comparisons do (hybrid \
         replication only in §8.5)",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::super::report::fake;
    use super::*;

    #[test]
    fn baselines_come_from_the_rows() {
        let rows = vec![
            fake::row(&[("algorithm", "star"), ("replication", "async")], 0.0, 9.0),
            fake::row(
                &[("algorithm", "pb-occ"), ("replication", "sync")],
                0.0,
                2.0,
            ),
            fake::row(
                &[("algorithm", "dist-occ"), ("replication", "async")],
                0.0,
                5.0,
            ),
        ];
        assert_eq!(baselines(&rows, "async"), ["dist-occ"]);
        assert_eq!(baselines(&rows, "sync"), ["pb-occ"]);
        assert_eq!(distributed(&rows, "sync"), Vec::<String>::new());
        assert_eq!(
            not_measured(&distributed(&rows, "async"), &DISTRIBUTED),
            "; not measured (not built into this experiment): dist-s2pl"
        );
        assert_eq!(star_at(&rows, &[]).map(|r| r.metrics.throughput), Some(9.0));
        assert!(baselines_setup(&rows).unwrap().contains("dist-occ, pb-occ"));
    }
}
