//! The shifting workload: every grouping keeps `c0 = c1 + c2` across the change of phase, counts
//! its transactions per interval on both sides of it, and automatic groups stay serializable while
//! they follow the change.

use std::time::Duration;

use phasedb_txn::{Occ, Protocol, TicToc, TwoPlNoWait};
use phasedb_workloads::shift::{Shift, ShiftConfig, ShiftGroups};

use crate::common;

fn config(groups: ShiftGroups) -> ShiftConfig {
    ShiftConfig {
        switch_after: Duration::from_millis(80),
        interval: Duration::from_millis(20),
        groups,
        ..ShiftConfig::default()
    }
}

fn runs_both_phases<P: Protocol>(groups: ShiftGroups) {
    let ctx = format!("{} {}", P::NAME, groups.name());
    let mut w = Shift::new(config(groups));
    let r = common::run::<P, _>(&mut w, 2, 200, true, common::seed_or(5));
    common::assert_recorded_serializable(&r, &ctx);
    let iv = w.intervals();
    assert!(iv.len() >= 8, "{ctx}: {} intervals", iv.len());
    let committed: u64 = iv.iter().map(|i| i.committed).sum();
    assert!(committed >= r.stats.total().committed, "{ctx}");
    assert!(
        iv[..4].iter().any(|i| i.committed > 0) && iv[4..].iter().any(|i| i.committed > 0),
        "{ctx}: transactions in both phases: {iv:?}"
    );
}

#[test]
fn every_fixed_grouping_keeps_the_counters_consistent_across_the_change() {
    for g in [
        ShiftGroups::Coarse,
        ShiftGroups::Fine,
        ShiftGroups::First,
        ShiftGroups::Second,
    ] {
        runs_both_phases::<Occ>(g);
        runs_both_phases::<TicToc>(g);
        runs_both_phases::<TwoPlNoWait>(g);
    }
}

#[test]
fn automatic_groups_stay_serializable_across_the_change() {
    runs_both_phases::<Occ>(ShiftGroups::Auto);
    runs_both_phases::<TicToc>(ShiftGroups::Auto);
}

#[test]
fn bad_settings_are_refused() {
    let mut c = config(ShiftGroups::Auto);
    c.ops = 0;
    assert!(c.validate().is_err());
    c.ops = 17;
    assert!(c.validate().unwrap_err().contains("--rows"));
    let mut c = config(ShiftGroups::Auto);
    c.write_share = 1.5;
    assert!(c.validate().is_err());
}
