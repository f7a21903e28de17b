//! `phasedb experiment`: the seeds' experiments as named sweeps that write a CSV, an SVG plot and a
//! short report beside each other.

mod claims;
mod cluster_rounds;
mod csv;
mod doppel;
mod granularity;
mod list;
mod pdur;
mod plot;
mod point_process;
mod protocols;
mod ramp;
mod registry;
mod report;
mod served;
mod settings;
mod silor;
mod star;
mod sweep;

use std::path::PathBuf;

use clap::Args;

pub use settings::Settings;

/// `phasedb experiment` arguments.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// The experiment to run (see --list).
    name: Option<String>,
    /// List every experiment of the seeds, its paper and setup, and whether this build runs it.
    #[arg(long)]
    list: bool,
    /// Directory for NAME.csv, NAME.svg and NAME.md (default: results/NAME).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds measured per point (default 2; 0.1 with --quick).
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds of warm-up per point (default 0.5; 0.05 with --quick).
    #[arg(long)]
    warmup: Option<f64>,
    /// Largest thread count of thread sweeps (default: the number of cores).
    #[arg(long)]
    threads_max: Option<usize>,
    /// A tiny version of the experiment (small data, short points), to check that it runs.
    #[arg(long)]
    quick: bool,
    /// Seed of the transaction generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs per point, in rounds (every point once per round); the run of median throughput is reported.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Only these protocols, comma-separated (default: every protocol of this build).
    #[arg(long, value_delimiter = ',')]
    protocols: Option<Vec<String>>,
    /// Run every point in this process instead of a fresh process per run of a point (quicker to
    /// start; later points then run on the heap and page tables earlier points left).
    #[arg(long)]
    in_process: bool,
    /// Run only point N, once, and print its outcome (how a sweep starts its point processes).
    #[arg(long, hide = true)]
    point: Option<usize>,
}

/// What an experiment produced: one row per point, how to plot them and the report.
pub struct Artifacts {
    /// One row per point, in the order they ran.
    pub rows: Vec<sweep::Row>,
    /// Axis names and title of the plot.
    pub plot: plot::PlotSpec,
    /// The Markdown report.
    pub report: String,
    /// The verdict line of each claim, echoed on the terminal.
    pub verdicts: Vec<String>,
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    2
}

/// Runs `phasedb experiment`; returns the process exit code.
pub fn run(args: ExperimentArgs) -> i32 {
    if args.list {
        print!("{}", list::table());
        return 0;
    }
    let Some(name) = args.name.as_deref() else {
        return fail(format!(
            "name an experiment to run, or pass --list\n{}",
            list::available_line()
        ));
    };
    let Some(experiment) = registry::find(name) else {
        return fail(format!(
            "unknown experiment `{name}`\n{}",
            list::available_line()
        ));
    };
    let Some(runner) = experiment.run else {
        return fail(format!(
            "experiment `{name}` ({}) is not available in this build yet\n{}",
            experiment.paper,
            list::available_line()
        ));
    };
    let settings = match Settings::resolve(experiment.name, &args) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let artifacts = match runner(&settings) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    match write(&settings, &artifacts) {
        Ok(paths) => {
            for v in &artifacts.verdicts {
                println!("{v}");
            }
            for p in paths {
                println!("wrote {}", p.display());
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// Writes the CSV, the SVG and the report into the output directory; returns their paths.
fn write(s: &Settings, a: &Artifacts) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(&s.out)
        .map_err(|e| format!("cannot create {}: {e}", s.out.display()))?;
    let path = |ext: &str| s.out.join(format!("{}.{ext}", s.name));
    let (csv_path, svg_path, md_path) = (path("csv"), path("svg"), path("md"));
    let save = |p: &PathBuf, text: &str| {
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    save(&csv_path, &csv::to_csv(&a.rows))?;
    save(&svg_path, &plot::to_svg(&a.plot, &a.rows)?)?;
    save(&md_path, &a.report)?;
    Ok(vec![csv_path, svg_path, md_path])
}
