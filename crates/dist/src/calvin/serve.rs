//! Running a Calvin node over TCP from a cluster file whose `[star]` table says
//! `algorithm = "calvin"`: what `phasedb node` calls for such a cluster.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::tcp::{TcpOptions, run};
use phasedb_net::{Addr, ClusterConfig};
use phasedb_txn::Procedures;

use crate::calvin::groups::Groups;
use crate::calvin::node::{CalvinNode, CalvinSettings, LockSet, ReadRows, open_database};
use crate::star::stats::StarStats;

fn invalid(text: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, text)
}

/// The settings a cluster file's `[star]` table gives a Calvin node (its cross-partition share and
/// seed; the load off until a benchmark starts it).
pub fn settings_of(cfg: &ClusterConfig) -> CalvinSettings {
    let star = cfg.star.as_ref();
    CalvinSettings {
        cross_partition: star.map_or(0.0, |s| s.cross_partition),
        seed: star.map_or(1, |s| s.seed),
        ..CalvinSettings::default()
    }
}

/// Serves node `id` of the Calvin cluster `cfg`, running `workload` with read/write sets
/// `lock_set` and read rows `read_rows`, until `shutdown` completes; returns its final counters. The node loads every
/// partition first. Must run inside a tokio runtime (a current-thread one keeps it on one core).
pub async fn serve<W>(
    cfg: &ClusterConfig,
    id: Addr,
    mut workload: W,
    lock_set: LockSet<W>,
    read_rows: ReadRows<W>,
    listener: Option<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<StarStats>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let groups = Groups::from_cluster(cfg).map_err(|e| invalid(e.to_string()))?;
    let me = cfg
        .node(id)
        .ok_or_else(|| invalid(format!("node {id} is not in the cluster file")))?;
    if let Some(l) = &listener {
        let at = l.local_addr()?;
        if at != me.addr {
            return Err(invalid(format!(
                "the listening socket is at {at}, but the cluster file puts node {id} at {}",
                me.addr
            )));
        }
    }
    let db = open_database(&mut workload, false);
    let mut opts = TcpOptions::new(id, cfg.peer_addrs());
    opts.listen = Some(me.addr);
    opts.listener = listener;
    opts.delay = cfg.delay();
    opts.poll = cfg.poll();
    // The sequencer cuts a batch every 10 ms: a tick of 0.5 ms keeps its cuts within 5%.
    opts.tick = Duration::from_micros(500).min(Duration::from_millis(cfg.server.tick_ms));
    let mut node = CalvinNode::new(
        id,
        groups,
        settings_of(cfg),
        &db,
        &workload,
        lock_set,
        read_rows,
    )
    .map_err(|e| invalid(e.to_string()))?;
    run(&mut node, opts, shutdown).await?;
    Ok(node.stats())
}
