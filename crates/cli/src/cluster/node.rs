//! `phasedb node --config cluster.toml --id N`: runs one cluster member until SIGINT or SIGTERM: a
//! RAMP partition server, a STAR node when the file has a `[star]` table, or a P-DUR replica
//! when it has a `[pdur]` table.

use std::path::PathBuf;

use clap::Args;
use phasedb_net::ClusterConfig;

/// `phasedb node` arguments.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The cluster file (nodes, addresses, partition placement, server settings).
    #[arg(long)]
    config: PathBuf,
    /// This node's id in the cluster file.
    #[arg(long)]
    id: u32,
    /// Print nothing but errors.
    #[arg(long)]
    quiet: bool,
    /// On a clean stop, write the server's final counters to this file (`name value` lines).
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Run only on this core (taken modulo the machine's cores), as `phasedb bench --cluster`
    /// places node i on core i.
    #[arg(long)]
    cpu: Option<usize>,
    /// Serve on this inherited listening socket (a file descriptor, already bound to the node's
    /// address in the cluster file) instead of binding the address: `phasedb bench --cluster`
    /// reserves each node's port this way so no other process can take it first.
    #[arg(long, value_name = "FD")]
    listen_fd: Option<i32>,
    /// P-DUR: this node restarts after losing its state (a process that died) and rejoins the
    /// running cluster under a new raft id, catching up by the groups' snapshots and logs.
    #[arg(long)]
    rejoin: bool,
}

/// Runs `phasedb node`; returns the process exit code.
pub fn run(args: NodeArgs) -> i32 {
    if let Err(e) = phasedb_dist::host::disable_huge_pages()
        && !args.quiet
    {
        eprintln!("warning: cannot turn transparent huge pages off: {e}");
    }
    if let Some(n) = args.cpu
        && let Err(e) = phasedb_dist::host::pin_to_core(n)
    {
        eprintln!("error: --cpu {n}: {e}");
        return 2;
    }
    let cfg = match ClusterConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let Some(me) = cfg.node(args.id).cloned() else {
        eprintln!(
            "error: node {} is not in {} (it has nodes 0..{})",
            args.id,
            args.config.display(),
            cfg.nodes.len() - 1
        );
        return 2;
    };
    let listener = match args.listen_fd.map(phasedb_dist::host::inherited_listener) {
        None => None,
        Some(Ok(l)) => Some(l),
        Some(Err(e)) => {
            eprintln!("error: --listen-fd: {e}");
            return 2;
        }
    };
    if cfg.pdur.is_some() {
        return super::pdur_node::run(
            &cfg,
            args.id,
            listener,
            args.quiet,
            args.stats.as_deref(),
            args.rejoin,
        );
    }
    if args.rejoin {
        eprintln!("error: --rejoin is for a cluster file with a [pdur] table");
        return 2;
    }
    if cfg.star.is_some() {
        return super::star_node::run(
            &args.config,
            &cfg,
            args.id,
            listener,
            args.quiet,
            args.stats.as_deref(),
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
    let result = rt.block_on(async {
        let shutdown = terminated()?;
        if !args.quiet {
            eprintln!(
                "node {} serving partitions {:?} on {} ({} nodes, {} partitions)",
                me.id,
                me.partitions,
                me.addr,
                cfg.nodes.len(),
                cfg.partitions
            );
        }
        phasedb_dist::ramp::node::serve(&cfg, args.id, listener, shutdown).await
    });
    match result {
        Ok(stats) => {
            if let Some(path) = &args.stats
                && let Err(e) = std::fs::write(path, stats.to_text())
            {
                eprintln!("error: cannot write {}: {e}", path.display());
                return 1;
            }
            if !args.quiet {
                eprintln!(
                    "node {} stopped cleanly: {} versions held, {} collected, {} pending, {} committed by CTP, {} aborted by CTP",
                    me.id,
                    stats.store.versions,
                    stats.store.collected,
                    stats.pending,
                    stats.ctp_commits,
                    stats.ctp_aborts
                );
            }
            0
        }
        Err(e) => {
            eprintln!("error: node {} cannot serve on {}: {e}", me.id, me.addr);
            1
        }
    }
}

/// Completes on SIGTERM or SIGINT (Ctrl-C). Must be called inside a tokio runtime.
pub(crate) fn terminated() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
