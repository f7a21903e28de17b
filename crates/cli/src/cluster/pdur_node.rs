//! `phasedb node` for a cluster file with a `[pdur]` table: one P-DUR replica
//! (`phasedb_dist::pdur::serve`): its partitions' worker threads behind one atomic broadcast group
//! per partition over all the nodes, running its own clients' load, until SIGINT or SIGTERM.

use std::path::Path;

use phasedb_dist::pdur::serve::{ServeOptions, serve};
use phasedb_net::ClusterConfig;

/// The file a node writes beside its counters file once its load is over.
pub fn done_path(stats: &Path) -> std::path::PathBuf {
    let mut s = stats.as_os_str().to_owned();
    s.push(".done");
    s.into()
}

/// This life's incarnation for a node that rejoins: tenths of a second since 2025, so every
/// restart of a node gets a higher one than the last (for about 13 years).
fn incarnation() -> u32 {
    const SINCE: u64 = 1_735_689_600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let tenths = now.as_millis() as u64 / 100;
    tenths
        .saturating_sub(SINCE * 10)
        .clamp(1, u64::from(u32::MAX)) as u32
}

/// Serves node `id` of the P-DUR cluster `cfg` (rejoining a running cluster after a restart
/// with `rejoin`); returns the exit code: 1 when the node cannot
/// serve, 0 after a clean stop.
pub fn run(
    cfg: &ClusterConfig,
    id: u32,
    listener: Option<std::net::TcpListener>,
    quiet: bool,
    stats_file: Option<&Path>,
    rejoin: bool,
) -> i32 {
    let table = cfg.pdur.as_ref().expect("called for a [pdur] table");
    if !quiet {
        eprintln!(
            "node {id}: {} replica {} of {} with {} partitions ({} workload), loading, then \
             serving on {}",
            if table.partitions == 1 {
                "DUR"
            } else {
                "P-DUR"
            },
            id,
            cfg.nodes.len(),
            table.partitions,
            table.workload,
            cfg.nodes[id as usize].addr
        );
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return 1;
        }
    };
    let marker = stats_file.map(done_path);
    let on_done: Box<dyn FnOnce() + Send> = Box::new(move || {
        if let Some(m) = marker
            && let Err(e) = std::fs::write(&m, "done\n")
        {
            eprintln!("error: cannot write {}: {e}", m.display());
        }
        if !quiet {
            eprintln!("node {id}: load over");
        }
    });
    let result = rt.block_on(async {
        let shutdown = super::node::terminated().map_err(|e| e.to_string())?;
        let opts = ServeOptions {
            on_done: Some(on_done),
            incarnation: if rejoin { incarnation() } else { 0 },
            ..ServeOptions::default()
        };
        serve(cfg, id, listener, shutdown, opts).await
    });
    match result {
        Ok(report) => {
            if let Some(file) = stats_file
                && let Err(e) = std::fs::write(file, report.to_text())
            {
                eprintln!("error: cannot write {}: {e}", file.display());
                return 1;
            }
            if !quiet {
                let secs = report.measured_ns as f64 / 1e9;
                eprintln!(
                    "node {id} stopped cleanly: {} committed ({:.0}/s), {} aborted",
                    report.load.committed(),
                    report.load.committed() as f64 / secs.max(1e-9),
                    report.load.aborted()
                );
            }
            0
        }
        Err(e) => {
            eprintln!("error: node {id}: {e}");
            1
        }
    }
}
