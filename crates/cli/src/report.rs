//! Formats a benchmark result as a table for people or as one JSON object for scripts.

use std::fmt::Write;

use phasedb_txn::{CONFLICT_KINDS, TypeStats};
use phasedb_workloads::{BenchOptions, BenchResult};
use serde_json::{Value, json};

/// A history check: transactions recorded and the verdict.
pub type Verified = (usize, Result<(), String>);

fn micros(s: &TypeStats, q: f64) -> f64 {
    if s.latency_ns.is_empty() {
        0.0
    } else {
        s.latency_ns.value_at_quantile(q) as f64 / 1000.0
    }
}

fn latency(s: &TypeStats) -> Value {
    json!({ "p50": micros(s, 0.5), "p99": micros(s, 0.99), "p999": micros(s, 0.999) })
}

/// Conflicts by cause, keyed by the cause's name.
fn causes(s: &TypeStats) -> Value {
    Value::Object(
        CONFLICT_KINDS
            .iter()
            .zip(s.conflict_kinds)
            .map(|(k, c)| (k.name().to_string(), json!(c)))
            .collect(),
    )
}

fn type_json(s: &TypeStats, secs: f64) -> Value {
    json!({
        "committed": s.committed,
        "throughput": s.committed as f64 / secs,
        "abort_rate": s.abort_rate(),
        "conflicts": s.conflicts,
        "conflicts_by_cause": causes(s),
        "user_aborts": s.user_aborts,
        "failures": s.failures,
        "stashed": s.stashed,
        "latency_us": latency(s),
    })
}

/// The result as one JSON object.
pub fn json(
    workload: &str,
    r: &BenchResult,
    settings: &[(&str, String)],
    opts: &BenchOptions,
    verified: Option<&Verified>,
) -> String {
    let secs = r.measured.as_secs_f64();
    let total = r.stats.total();
    let mut per_type = serde_json::Map::new();
    for (i, name) in r.txn_types.iter().enumerate() {
        let s = r.stats.types.get(i).cloned().unwrap_or_default();
        per_type.insert(name.to_string(), type_json(&s, secs));
    }
    let mut config = serde_json::Map::new();
    config.insert("workload".into(), json!(workload));
    config.insert("protocol".into(), json!(r.protocol));
    config.insert("threads".into(), json!(opts.threads));
    config.insert("warmup_s".into(), json!(opts.warmup.as_secs_f64()));
    config.insert("duration_s".into(), json!(opts.duration.as_secs_f64()));
    config.insert("seed".into(), json!(opts.seed));
    for (k, v) in settings {
        let value = v
            .parse::<f64>()
            .map(|x| json!(x))
            .unwrap_or_else(|_| json!(v));
        config.insert(k.to_string(), value);
    }
    let mut out = json!({
        "workload": workload,
        "protocol": r.protocol,
        "throughput": r.throughput(),
        "abort_rate": total.abort_rate(),
        "committed": total.committed,
        "conflicts": total.conflicts,
        "measured_s": secs,
        "latency_us": latency(&total),
        "per_type": per_type,
        "config": config,
        "worker_cpu_s": r.worker_cpu.as_secs_f64(),
        "committed_per_cpu_s": total.committed as f64 / r.worker_cpu.as_secs_f64().max(1e-9),
        "load_s": r.load_seconds,
        "memory_bytes": r.memory_bytes,
        "check": match &r.check { Ok(()) => json!("ok"), Err(e) => json!(e) },
    });
    if !r.protocol_report.is_empty() {
        let figures: serde_json::Map<String, Value> = r
            .protocol_report
            .iter()
            .map(|(k, v)| {
                (
                    k.replace(' ', "_"),
                    v.parse::<f64>().map_or_else(|_| json!(v), |x| json!(x)),
                )
            })
            .collect();
        out["protocol_report"] = Value::Object(figures);
    }
    if let Some(d) = &opts.config.durability {
        out["durability"] = durability_json(d, r);
    }
    if let Some((n, verdict)) = verified {
        out["serializable"] = json!({
            "transactions": n,
            "verdict": match verdict { Ok(()) => json!("ok"), Err(e) => json!(e) },
        });
    }
    out.to_string()
}

/// The durability settings, what was recovered and, with durable results, their figures.
fn durability_json(d: &phasedb_txn::Durability, r: &BenchResult) -> Value {
    let mut out = json!({
        "data_dir": d.dir.display().to_string(),
        "fsync": format!("{:?}", d.fsync).to_lowercase(),
        "loggers": d.loggers,
        "logging_failure": r.logging_failure,
    });
    if let Some(rec) = &r.recovery {
        out["recovery"] = json!({
            "fresh": rec.fresh,
            "checkpoint": rec.checkpoint,
            "skipped_checkpoints": rec.skipped_checkpoints,
            "checkpoint_rows": rec.checkpoint_rows,
            "log_records": rec.log_records,
            "dropped_records": rec.dropped_records,
            "torn_bytes": rec.torn_bytes,
            "durable_epoch": rec.durable_epoch,
            "seconds": rec.seconds,
            "replay_seconds": rec.replay_seconds,
            "replay_records_per_s": rec.log_records as f64 / rec.replay_seconds.max(1e-9),
            "table_records": rec.table_records.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        });
    }
    if let Some(bytes) = r.log_bytes {
        let committed = r.stats.total().committed.max(1);
        out["log"] = json!({
            "bytes": bytes,
            "bytes_per_txn": bytes as f64 / committed as f64,
        });
    }
    if let Some(c) = &r.checkpoints {
        out["checkpoints"] = json!({
            "interval_s": d.checkpoint_interval.map(|i| i.as_secs_f64()),
            "threads": d.checkpoint_threads,
            "taken": c.taken,
            "rows": c.rows,
            "seconds": c.seconds,
            "image_seconds": c.image_seconds,
            "rows_per_s": c.rows as f64 / c.image_seconds.max(1e-9),
            "failed": c.failed,
            "last_error": c.last_error,
        });
    }
    if let Some(s) = &r.durable {
        let secs = r.measured.as_secs_f64().max(1e-9);
        let epoch_ms = s.epoch_interval.as_secs_f64() * 1e3;
        let ms = |q: f64| s.latency_ns.value_at_quantile(q) as f64 / 1e6;
        let per_type: serde_json::Map<String, Value> = r
            .txn_types
            .iter()
            .zip(&s.per_type)
            .map(|(name, n)| (name.to_string(), json!(n)))
            .collect();
        out["durable"] = json!({
            "transactions": s.durable,
            "throughput": s.durable as f64 / secs,
            "per_type": per_type,
            "latency_ms": {"p50": ms(0.5), "p99": ms(0.99), "p999": ms(0.999)},
            "latency_epochs": {"p50": ms(0.5) / epoch_ms, "p99": ms(0.99) / epoch_ms},
        });
    }
    out
}

/// The result as a table.
pub fn table(
    workload: &str,
    r: &BenchResult,
    settings: &[(&str, String)],
    opts: &BenchOptions,
    verified: Option<&Verified>,
) -> String {
    let secs = r.measured.as_secs_f64();
    let mut out = String::new();
    let cfg: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        out,
        "{workload} on {} with {} threads, {:.1} s measured after {:.1} s warm-up (seed {})",
        r.protocol,
        opts.threads,
        secs,
        opts.warmup.as_secs_f64(),
        opts.seed
    );
    let _ = writeln!(out, "  {}", cfg.join(" "));
    let _ = writeln!(
        out,
        "  loaded in {:.2} s; tables hold about {:.1} MiB",
        r.load_seconds,
        r.memory_bytes as f64 / (1 << 20) as f64
    );
    let _ = writeln!(
        out,
        "\n{:<12} {:>12} {:>14} {:>8} {:>10} {:>10} {:>10}",
        "type", "committed", "txn/s", "abort%", "p50 us", "p99 us", "p999 us"
    );
    let mut line = |name: &str, s: &TypeStats| {
        let _ = writeln!(
            out,
            "{:<12} {:>12} {:>14.0} {:>8.2} {:>10.1} {:>10.1} {:>10.1}",
            name,
            s.committed,
            s.committed as f64 / secs,
            s.abort_rate() * 100.0,
            micros(s, 0.5),
            micros(s, 0.99),
            micros(s, 0.999)
        );
    };
    for (i, name) in r.txn_types.iter().enumerate() {
        line(name, &r.stats.types.get(i).cloned().unwrap_or_default());
    }
    if r.txn_types.len() > 1 {
        line("total", &r.stats.total());
    }
    let cpu = r.worker_cpu.as_secs_f64();
    let _ = writeln!(
        out,
        "workers used {cpu:.2} CPU-s: {:.0} committed per CPU-second",
        r.stats.total().committed as f64 / cpu.max(1e-9)
    );
    if let Some(rec) = &r.recovery {
        if rec.fresh {
            let _ = writeln!(
                out,
                "durable: new data directory, loaded tables written as checkpoint 1"
            );
        } else {
            let _ = writeln!(
                out,
                "recovered: checkpoint {} ({} rows) and {} log records up to epoch {} in {:.2} s \
                 ({:.0} records/s replayed; {} records past the durable epoch dropped, {} torn bytes)",
                rec.checkpoint.unwrap_or(0),
                rec.checkpoint_rows,
                rec.log_records,
                rec.durable_epoch,
                rec.seconds,
                rec.log_records as f64 / rec.replay_seconds.max(1e-9),
                rec.dropped_records,
                rec.torn_bytes
            );
            for s in &rec.skipped_checkpoints {
                let _ = writeln!(out, "  passed over {s}");
            }
        }
    }
    if let Some(s) = &r.durable {
        let epoch_ms = s.epoch_interval.as_secs_f64() * 1e3;
        let ms = |q: f64| s.latency_ns.value_at_quantile(q) as f64 / 1e6;
        let _ = writeln!(
            out,
            "durable: {} transactions ({:.0} txn/s) acknowledged durable; commit to durable \
             p50 {:.1} ms, p99 {:.1} ms ({:.2} epochs of {:.0} ms), p999 {:.1} ms",
            s.durable,
            s.durable as f64 / secs.max(1e-9),
            ms(0.5),
            ms(0.99),
            ms(0.99) / epoch_ms,
            epoch_ms,
            ms(0.999)
        );
    }
    if !r.protocol_report.is_empty() {
        let _ = writeln!(out, "\n{}:", r.protocol);
        for (k, v) in &r.protocol_report {
            let _ = writeln!(out, "  {k:<32} {v}");
        }
    }
    let _ = writeln!(
        out,
        "\nconsistency check: {}",
        match &r.check {
            Ok(()) => "ok".to_string(),
            Err(e) => e.clone(),
        }
    );
    if let Some((n, verdict)) = verified {
        let v = match verdict {
            Ok(()) => "serializable".to_string(),
            Err(e) => e.clone(),
        };
        let _ = writeln!(out, "history of {n} transactions: {v}");
    }
    out
}
