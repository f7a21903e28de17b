//! Running a STAR node over TCP from a cluster file with a `[star]` table: what `phasedb node`
//! calls for a STAR cluster. The table's `algorithm` picks STAR's node or a baseline's
//! ([`crate::star::baselines`]); both speak [`crate::star::StarMsg`].

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::tcp::{TcpOptions, run};
use phasedb_net::{Addr, ClusterConfig, Node, StarAlgorithm};
use phasedb_txn::Procedures;

use crate::star::baselines::{DistNode, DistProtocol, PbOccNode};
use crate::star::history_log::{HistoryWriter, Recorder, Recording};
use crate::star::layout::Layout;
use crate::star::msg::StarMsg;
use crate::star::node::{StarNode, StarSettings, open_database};
use crate::star::stats::StarStats;

fn invalid(text: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, text)
}

/// The tick period of a STAR node: fine enough for the coordinator to end phases on time (a
/// twentieth of an iteration), never coarser than the cluster file's tick.
pub fn tick_of(cfg: &ClusterConfig, layout: &Layout) -> Duration {
    (layout.iteration() / 20)
        .min(Duration::from_millis(cfg.server.tick_ms))
        .max(Duration::from_micros(100))
}

/// Serves node `id` of `cfg` (a STAR node, or a baseline's as the `[star]` table says) running
/// `workload` until `shutdown` completes; returns its final
/// counters. The node loads the partitions it holds first. A node started again while the
/// cluster runs (the same command after a crash) is recognised by its new incarnation, forgets
/// what it loaded and recovers its partitions from the live replicas (`recover`, §7.2). `settings` default to those of the
/// `[star]` table (with no local load); `listener`, if given, is a socket already listening on
/// the node's address. With a `history` in the `[star]` table the node records its committed
/// transactions and appends them to its file as it goes (`history_log`). Must run inside a
/// tokio runtime (a current-thread one keeps the node on one core).
pub async fn serve<W>(
    cfg: &ClusterConfig,
    id: Addr,
    mut workload: W,
    settings: Option<StarSettings>,
    listener: Option<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<StarStats>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    let layout = Layout::from_cluster(cfg).map_err(|e| invalid(e.to_string()))?;
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
    let star = cfg
        .star
        .as_ref()
        .expect("Layout::from_cluster checked [star]");
    let mut settings = settings.unwrap_or_else(|| StarSettings::from_config(star));
    if settings.incarnation == 0 {
        // Tells this start from the node's previous ones (§7.2: a restarted node recovers).
        settings.incarnation = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
    }
    let history = star.history_of(id);
    let db = open_database(&mut workload, &layout, id, history.is_some())
        .map_err(|e| invalid(e.to_string()))?;
    let opened = |path: &std::path::Path| {
        HistoryWriter::open(path, id, settings.incarnation).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
        })
    };
    let writer = history.as_deref().map(opened).transpose()?;
    let mut opts = TcpOptions::new(id, cfg.peer_addrs());
    opts.listen = Some(me.addr);
    opts.listener = listener;
    opts.delay = cfg.delay();
    opts.poll = cfg.poll();
    opts.tick = tick_of(cfg, &layout);
    match star.algorithm {
        StarAlgorithm::Star => {
            let mut node = StarNode::new(id, layout, settings, &db, &workload)
                .map_err(|e| invalid(e.to_string()))?;
            drive(&mut node, opts, shutdown, writer).await?;
            Ok(node.stats())
        }
        StarAlgorithm::PbOcc => {
            let mut node = PbOccNode::new(id, layout, settings, &db, &workload)
                .map_err(|e| invalid(e.to_string()))?;
            drive(&mut node, opts, shutdown, writer).await?;
            Ok(node.stats())
        }
        StarAlgorithm::DistOcc | StarAlgorithm::DistS2pl => {
            let protocol = if star.algorithm == StarAlgorithm::DistOcc {
                DistProtocol::Occ
            } else {
                DistProtocol::S2pl
            };
            let mut node = DistNode::new(id, protocol, layout, settings, &db, &workload)
                .map_err(|e| invalid(e.to_string()))?;
            drive(&mut node, opts, shutdown, writer).await?;
            Ok(node.stats())
        }
        StarAlgorithm::Calvin => Err(invalid(
            "a Calvin cluster is served by phasedb_dist::calvin::serve".into(),
        )),
    }
}

/// Runs `node` over TCP until `shutdown`; with a `writer`, appends its history as it goes and
/// what is left at the stop.
async fn drive<N>(
    node: &mut N,
    opts: TcpOptions<StarMsg>,
    shutdown: impl Future<Output = ()>,
    writer: Option<HistoryWriter>,
) -> std::io::Result<()>
where
    N: Node<Msg = StarMsg> + Recording,
{
    let Some(writer) = writer else {
        return run(node, opts, shutdown).await;
    };
    let mut recorder = Recorder::new(node, writer);
    run(&mut recorder, opts, shutdown).await?;
    recorder.finish()
}
