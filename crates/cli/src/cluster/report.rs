//! Formats a cluster benchmark result as a table or one JSON object.

use std::fmt::Write;

use phasedb_dist::ramp::bench::stats::KindStats;
use phasedb_dist::ramp::bench::{BenchConfig, BenchReport};
use phasedb_net::ClusterConfig;
use serde_json::{Value, json};

fn kind_json(s: &KindStats, secs: f64) -> Value {
    json!({
        "committed": s.committed,
        "throughput": s.committed as f64 / secs,
        "abort_rate": abort_rate(s),
        "two_round_reads": s.two_round_reads,
        "restarts": s.restarts,
        "latency_us": { "p50": s.latency_us(0.5), "p99": s.latency_us(0.99), "p999": s.latency_us(0.999) },
    })
}

fn abort_rate(s: &KindStats) -> f64 {
    let all = s.committed + s.aborted;
    if all == 0 {
        0.0
    } else {
        s.aborted as f64 / all as f64
    }
}

/// The result as one JSON object.
pub fn json(r: &BenchReport, b: &BenchConfig, cfg: &ClusterConfig) -> Value {
    let secs = r.measured.as_secs_f64().max(1e-9);
    let total = r.stats.total();
    let w = &b.workload;
    let mut out = json!({
        "workload": "ycsb-ramp",
        "protocol": r.algorithm.name(),
        "throughput": r.throughput(),
        "abort_rate": abort_rate(&total),
        "committed": total.committed,
        "measured_s": secs,
        "latency_us": { "p50": total.latency_us(0.5), "p99": total.latency_us(0.99), "p999": total.latency_us(0.999) },
        "per_type": {
            "read": kind_json(&r.stats.read, secs),
            "write": kind_json(&r.stats.write, secs),
        },
        "config": {
            "servers": r.servers,
            "partitions": cfg.partitions,
            "clients": b.clients,
            "threads": b.threads,
            "warmup_s": b.warmup.as_secs_f64(),
            "duration_s": b.duration.as_secs_f64(),
            "seed": b.seed,
            "items": w.items,
            "ops": w.ops,
            "read_ratio": w.read_ratio,
            "theta": w.theta,
            "value_size": w.value_size,
            "bloom_bits": b.bloom_bits,
            "bloom_hashes": b.bloom_hashes,
            "delay_us": cfg.net.delay_us,
            "poll_us": cfg.net.poll_us,
            "gc_window_ms": cfg.server.gc_window_ms,
            "skip_commit": b.skip_commit,
            "pinned": b.pin,
        },
    });
    if let Some(v) = &r.verified {
        out["read_atomic"] = match v {
            Ok(s) => json!({ "transactions": s.transactions, "verdict": "ok" }),
            Err(a) => json!({ "verdict": a }),
        };
    }
    out
}

/// The result as a table.
pub fn table(r: &BenchReport, b: &BenchConfig, cfg: &ClusterConfig) -> String {
    let secs = r.measured.as_secs_f64().max(1e-9);
    let w = &b.workload;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ycsb-ramp on {} with {} nodes and {} clients, {:.1} s measured after {:.1} s warm-up (seed {})",
        r.algorithm.name(),
        r.servers,
        b.clients,
        secs,
        b.warmup.as_secs_f64(),
        b.seed
    );
    let _ = writeln!(
        out,
        "  items={} ops={} read_ratio={} theta={} value_size={} delay_us={} poll_us={} partitions={}",
        w.items,
        w.ops,
        w.read_ratio,
        w.theta,
        w.value_size,
        cfg.net.delay_us,
        cfg.net.poll_us,
        cfg.partitions
    );
    let _ = writeln!(
        out,
        "\n{:<8} {:>10} {:>12} {:>8} {:>10} {:>9} {:>10} {:>10} {:>10}",
        "type",
        "committed",
        "txn/s",
        "abort%",
        "2-round",
        "restarts",
        "p50 us",
        "p99 us",
        "p999 us"
    );
    let mut line = |name: &str, s: &KindStats| {
        let _ = writeln!(
            out,
            "{:<8} {:>10} {:>12.0} {:>8.2} {:>10} {:>9} {:>10.1} {:>10.1} {:>10.1}",
            name,
            s.committed,
            s.committed as f64 / secs,
            abort_rate(s) * 100.0,
            s.two_round_reads,
            s.restarts,
            s.latency_us(0.5),
            s.latency_us(0.99),
            s.latency_us(0.999)
        );
    };
    line("read", &r.stats.read);
    line("write", &r.stats.write);
    line("total", &r.stats.total());
    if let Some(v) = &r.verified {
        let verdict = match v {
            Ok(s) => format!(
                "{} transactions, no fractured or aborted reads",
                s.transactions
            ),
            Err(a) => a.join("\n  "),
        };
        let _ = writeln!(out, "\nread atomic: {verdict}");
    }
    out
}
