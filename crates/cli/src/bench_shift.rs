//! `phasedb bench shift`: the workload whose conflicting columns change halfway
//! ([`phasedb_workloads::shift`]), and its abort rate per interval.

use std::time::Duration;

use clap::{Args, ValueEnum};
use phasedb_workloads::shift::{Shift, ShiftConfig, ShiftGroups};

/// The column groups of the shifting table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShiftGranularity {
    /// One group per row.
    Coarse,
    /// One group per counter.
    Fine,
    /// Phase 1's split, {c0 c1}{c2 c3}.
    First,
    /// Phase 2's split, {c0 c2}{c1 c3}.
    Second,
    /// Chosen and changed by the engine while it runs (protocols without phases).
    Auto,
}

/// Flags of `phasedb bench shift`.
#[derive(Args, Debug)]
pub struct ShiftArgs {
    /// Rows, all hot.
    #[arg(long, default_value_t = ShiftConfig::default().rows)]
    rows: u64,
    /// Distinct rows per transaction.
    #[arg(long, default_value_t = ShiftConfig::default().ops)]
    ops: usize,
    /// Share of transactions that update counters (the rest read others).
    #[arg(long, default_value_t = ShiftConfig::default().write_share)]
    write_share: f64,
    /// Seconds from the load to the change of which counters conflict.
    #[arg(long, default_value_t = 2.0)]
    switch_after: f64,
    /// Milliseconds per line of the abort rate over time.
    #[arg(long, default_value_t = 100.0)]
    interval_ms: f64,
    /// The table's column groups.
    #[arg(long, value_enum, default_value_t = ShiftGranularity::Auto)]
    pub(crate) granularity: ShiftGranularity,
}

impl ShiftArgs {
    /// The workload of the flags, or what is wrong with them.
    pub fn workload(&self) -> Result<Shift, String> {
        if !(0.0..86_400.0).contains(&self.switch_after) {
            return Err("--switch-after must be a number of seconds from 0".into());
        }
        if !(self.interval_ms >= 1.0 && self.interval_ms <= 60_000.0) {
            return Err("--interval-ms must be between 1 and 60000".into());
        }
        let cfg = ShiftConfig {
            rows: self.rows,
            ops: self.ops,
            write_share: self.write_share,
            switch_after: Duration::from_secs_f64(self.switch_after),
            interval: Duration::from_secs_f64(self.interval_ms / 1000.0),
            groups: match self.granularity {
                ShiftGranularity::Coarse => ShiftGroups::Coarse,
                ShiftGranularity::Fine => ShiftGroups::Fine,
                ShiftGranularity::First => ShiftGroups::First,
                ShiftGranularity::Second => ShiftGroups::Second,
                ShiftGranularity::Auto => ShiftGroups::Auto,
            },
        };
        cfg.validate()?;
        Ok(Shift::new(cfg))
    }

    /// The abort rate per interval since the load, one line each, the change of phase marked.
    pub fn over_time(&self, w: &Shift) -> String {
        let mut out = String::from("\nseconds   committed   abort%\n");
        let step = self.interval_ms / 1000.0;
        for (i, iv) in w.intervals().iter().enumerate() {
            let at = i as f64 * step;
            let mark = if at <= self.switch_after && self.switch_after < at + step {
                "  <- phase 2 starts"
            } else {
                ""
            };
            out += &format!(
                "{at:7.2} {:11} {:8.2}{mark}\n",
                iv.committed,
                iv.abort_rate() * 100.0
            );
        }
        out
    }
}
