//! The workload of a STAR cluster: read from the `[star]` table's `workload` and `workload_args`
//! (the same flags `phasedb bench ycsb|tpcc` takes, parsed by the same definitions), or from the
//! command line of `phasedb bench --algorithm star`, which writes them into the cluster file its
//! nodes read. The file is the one source every node learns the workload from, so all of them
//! create, load and run the same data.

use clap::{Parser, Subcommand};
use phasedb_net::StarConfig;
use phasedb_workloads::tpcc::{ProceduresMix, TpccProceduresConfig};
use phasedb_workloads::ycsb::{OPS, YcsbProceduresConfig};

use crate::bench::{Granularity, TpccArgs, YcsbArgs};

/// A workload STAR nodes run, with its settings.
#[derive(Clone, Debug, PartialEq)]
pub enum StarWorkload {
    /// YCSB in STAR's shape, partition-major (§8.1.1).
    Ycsb(YcsbProceduresConfig),
    /// TPC-C's NewOrder and Payment, one partition per warehouse (§8.1.1).
    Tpcc(TpccProceduresConfig),
}

/// The workload flags of a `[star]` table, parsed like `phasedb bench`'s.
#[derive(Parser, Debug)]
#[command(no_binary_name = true, disable_help_subcommand = true)]
struct WorkloadLine {
    #[command(subcommand)]
    workload: WorkloadFlags,
}

#[derive(Subcommand, Debug)]
enum WorkloadFlags {
    Ycsb(YcsbArgs),
    Tpcc(TpccArgs),
}

fn fine(g: Granularity) -> bool {
    g == Granularity::Fine
}

impl StarWorkload {
    /// YCSB from `phasedb bench ycsb`'s flags over `partitions` partitions: `--rows` per
    /// partition (default 200K, §8.1.1); the other flags STAR's YCSB fixes are refused if they
    /// ask for something else.
    pub fn ycsb(args: &YcsbArgs, partitions: u32) -> Result<StarWorkload, String> {
        if let Some(v) = args.variant.as_deref().filter(|&v| v != "star") {
            return Err(format!(
                "STAR runs YCSB's star variant (STAR §8.1.1), not --variant {v}"
            ));
        }
        if let Some(n) = args.ops.filter(|&n| n != OPS) {
            return Err(format!(
                "STAR's YCSB has {OPS} operations per transaction, not --ops {n}"
            ));
        }
        if let Some(t) = args.theta.filter(|&t| t != 0.0) {
            return Err(format!(
                "STAR's YCSB draws keys uniformly: --theta {t} is not built for it"
            ));
        }
        let d = YcsbProceduresConfig::star(partitions);
        let cfg = YcsbProceduresConfig {
            partitions,
            rows_per_partition: args.rows.unwrap_or(d.rows_per_partition),
            columns: args.columns.unwrap_or(d.columns),
            column_size: args.column_size.unwrap_or(d.column_size),
            read_ratio: args.read_ratio.unwrap_or(d.read_ratio),
            fine: fine(args.granularity),
        };
        cfg.validate()?;
        Ok(StarWorkload::Ycsb(cfg))
    }

    /// TPC-C from `phasedb bench tpcc`'s flags over `partitions` partitions, one per warehouse.
    pub fn tpcc(args: &TpccArgs, partitions: u32) -> Result<StarWorkload, String> {
        if let Some(w) = args.warehouses.filter(|&w| w != partitions) {
            return Err(format!(
                "--warehouses {w} but {partitions} partitions: STAR's TPC-C has one partition per warehouse"
            ));
        }
        if args.remote_item_ratio.is_some() || args.remote_payment_ratio.is_some() {
            return Err("--remote-item-ratio and --remote-payment-ratio do not apply to STAR: \
                 the share of cross-partition transactions is --cross-partition ([star] cross_partition)"
                .into());
        }
        let mix = args.mix.as_deref().unwrap_or("no-p");
        let mix = ProceduresMix::parse(mix).ok_or_else(|| {
            format!(
                "STAR runs TPC-C's NewOrder and Payment (STAR §8.1.1): --mix new-order, payment or no-p, not {mix}"
            )
        })?;
        let cfg = TpccProceduresConfig {
            warehouses: partitions,
            mix,
            fine: fine(args.granularity),
        };
        cfg.validate()?;
        Ok(StarWorkload::Tpcc(cfg))
    }

    /// The workload of a cluster file's `[star]` table.
    pub fn from_config(star: &StarConfig) -> Result<StarWorkload, String> {
        let name = star.workload.as_deref().ok_or(
            "the [star] table names no workload: add workload = \"ycsb\" or \"tpcc\" \
             (and its flags as workload_args = [...])",
        )?;
        if name != "ycsb" && name != "tpcc" {
            return Err(format!(
                "[star] workload must be \"ycsb\" or \"tpcc\", not {name:?}"
            ));
        }
        let line = std::iter::once(name).chain(star.workload_args.iter().map(String::as_str));
        let parsed = WorkloadLine::try_parse_from(line).map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            format!(
                "[star] workload_args: {}",
                first.strip_prefix("error: ").unwrap_or(first)
            )
        })?;
        let in_table = |e: String| format!("[star] workload_args: {e}");
        match parsed.workload {
            WorkloadFlags::Ycsb(y) => Self::ycsb(&y, star.partitions).map_err(in_table),
            WorkloadFlags::Tpcc(t) => Self::tpcc(&t, star.partitions).map_err(in_table),
        }
    }

    /// The `[star]` table's `workload`.
    pub fn name(&self) -> &'static str {
        match self {
            StarWorkload::Ycsb(_) => "ycsb",
            StarWorkload::Tpcc(_) => "tpcc",
        }
    }

    /// The `[star]` table's `workload_args`: every setting, so [`StarWorkload::from_config`] gives
    /// this workload back.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = match self {
            StarWorkload::Ycsb(c) => vec![
                "--rows".into(),
                c.rows_per_partition.to_string(),
                "--read-ratio".into(),
                c.read_ratio.to_string(),
                "--columns".into(),
                c.columns.to_string(),
                "--column-size".into(),
                c.column_size.to_string(),
            ],
            StarWorkload::Tpcc(c) => vec![
                "--warehouses".into(),
                c.warehouses.to_string(),
                "--mix".into(),
                c.mix.name().into(),
            ],
        };
        if self.fine() {
            args.extend(["--granularity".into(), "fine".into()]);
        }
        args
    }

    fn fine(&self) -> bool {
        match self {
            StarWorkload::Ycsb(c) => c.fine,
            StarWorkload::Tpcc(c) => c.fine,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(workload: Option<&str>, args: &[&str], partitions: u32) -> StarConfig {
        StarConfig {
            workload: workload.map(str::to_string),
            workload_args: args.iter().map(|a| a.to_string()).collect(),
            ..StarConfig::new(partitions)
        }
    }

    #[test]
    fn the_written_flags_give_the_workload_back() {
        let ycsb = StarWorkload::ycsb(
            &YcsbArgs {
                rows: Some(300),
                read_ratio: Some(0.85),
                granularity: Granularity::Fine,
                ..YcsbArgs::default()
            },
            3,
        )
        .unwrap();
        let tpcc = StarWorkload::tpcc(
            &TpccArgs {
                mix: Some("payment".into()),
                ..TpccArgs::default()
            },
            2,
        )
        .unwrap();
        for (w, partitions) in [(ycsb, 3), (tpcc, 2)] {
            let mut star = StarConfig::new(partitions);
            star.workload = Some(w.name().into());
            star.workload_args = w.args();
            assert_eq!(StarWorkload::from_config(&star), Ok(w));
        }
    }

    #[test]
    fn defaults_are_stars_evaluation() {
        let StarWorkload::Ycsb(y) =
            StarWorkload::from_config(&table(Some("ycsb"), &[], 4)).unwrap()
        else {
            panic!("not ycsb")
        };
        assert_eq!(y, YcsbProceduresConfig::star(4));
        let StarWorkload::Tpcc(t) =
            StarWorkload::from_config(&table(Some("tpcc"), &[], 2)).unwrap()
        else {
            panic!("not tpcc")
        };
        assert_eq!((t.warehouses, t.mix), (2, ProceduresMix::NewOrderPayment));
    }

    #[test]
    fn bad_workloads_are_refused_with_the_reason() {
        let refused = |w: Option<&str>, args: &[&str], p: u32| {
            StarWorkload::from_config(&table(w, args, p)).unwrap_err()
        };
        assert!(refused(None, &[], 2).contains("names no workload"));
        assert!(refused(Some("bank"), &[], 2).contains("\"ycsb\" or \"tpcc\", not \"bank\""));
        let e = refused(Some("ycsb"), &["--rowz", "5"], 2);
        assert!(
            e.starts_with("[star] workload_args: unexpected argument '--rowz'"),
            "{e}"
        );
        assert!(refused(Some("ycsb"), &["--rows", "x"], 2).contains("invalid value 'x'"));
        assert!(refused(Some("ycsb"), &["--ops", "8"], 2).contains("4 operations"));
        assert!(refused(Some("ycsb"), &["--theta", "0.9"], 2).contains("uniformly"));
        assert!(refused(Some("ycsb"), &["--variant", "ramp"], 2).contains("star variant"));
        assert!(refused(Some("ycsb"), &["--rows", "2"], 2).contains("at least 4 rows"));
        assert!(
            refused(Some("tpcc"), &["--warehouses", "3"], 2)
                .contains("one partition per warehouse")
        );
        assert!(refused(Some("tpcc"), &["--mix", "standard"], 2).contains("NewOrder and Payment"));
        assert!(
            refused(Some("tpcc"), &["--remote-item-ratio", "0.1"], 2).contains("--cross-partition")
        );
    }
}
