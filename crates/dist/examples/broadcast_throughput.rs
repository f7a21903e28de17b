//! Delivered proposals per second of one broadcast group over TCP on 127.0.0.1, with batching.
//!
//! `cargo run --release -p phasedb-dist --example broadcast_throughput -- [members] [seconds]
//! [payload bytes] [window]` (defaults 3, 2, 64, 256): every member proposes, keeping `window`
//! of its payloads undelivered; the rate is what member 0 delivers after a 0.5 s warm-up.

#[path = "../tests/broadcast/harness.rs"]
mod harness;

use std::sync::atomic::Ordering;
use std::time::Duration;

use harness::{Load, run_tcp};
use phasedb_dist::broadcast::BroadcastConfig;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map(|a| a.parse().expect("arguments are numbers"))
        .unwrap_or(default)
}

fn main() {
    let members = arg(1, 3) as u32;
    let seconds = arg(2, 2);
    let size = arg(3, 64) as usize;
    let window = arg(4, 256);
    let groups = vec![(0, (0..members).collect::<Vec<_>>())];
    let load = Load {
        per_tick: 0,
        window,
        limit: u64::MAX,
        size,
    };
    let warmup = Duration::from_millis(500);
    let end = warmup + Duration::from_secs(seconds);
    let mut at_warmup = None;
    let mut at_end = 0;
    let replicas = run_tcp(
        members,
        &groups,
        &BroadcastConfig::default(),
        load,
        u64::MAX,
        |p, t| {
            let delivered = p.delivered[0].load(Ordering::Relaxed);
            if t >= warmup && at_warmup.is_none() {
                at_warmup = Some(delivered);
            }
            at_end = delivered;
            t >= end
        },
    );
    let rate = (at_end - at_warmup.unwrap_or(0)) as f64 / seconds as f64;
    let stats = replicas[0].bcast.stats();
    println!(
        "members {members} payload {size} B window {window}: {rate:.0} delivered/s at member 0 \
         ({:.1} payloads per batch it proposed)",
        stats.proposed_payloads as f64 / stats.proposed_batches.max(1) as f64
    );
}
