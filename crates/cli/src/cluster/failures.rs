//! The part of every cluster benchmark report about failures: the failure events (injected or
//! met), requests that timed out or were retried, and throughput per interval so a stall shows.

use std::fmt::Write;

use phasedb_dist::ramp::bench::faults::{Faults, Timeline};
use serde_json::{Value, json};

/// What a run saw of failures.
pub struct FailureReport<'a> {
    /// The events, injected and met.
    pub faults: &'a Faults,
    /// Throughput per interval since the load started.
    pub timeline: &'a Timeline,
    /// Counters of requests that timed out or were retried, by name.
    pub retries: Vec<(&'static str, u64)>,
}

impl FailureReport<'_> {
    /// The section as JSON (`failures` and `timeline`).
    pub fn json(&self) -> Value {
        let plan = self.faults.plan().map(|p| {
            json!({
                "node": p.node,
                "at_s": p.at.as_secs_f64(),
                "restart_after_s": p.restart_after.map(|r| r.as_secs_f64()),
            })
        });
        let retries: serde_json::Map<String, Value> = self
            .retries
            .iter()
            .map(|(name, n)| (name.to_string(), json!(n)))
            .collect();
        json!({
            "injected": plan,
            "events": self.faults.events,
            "unasked": self.faults.unasked().len(),
            "retries": retries,
            "timeline": {
                "interval_s": self.timeline.interval_s,
                "end_s": self.timeline.points.iter().map(|p| (p.0 * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
                "txn_per_s": self.timeline.points.iter().map(|p| p.1.round()).collect::<Vec<_>>(),
                "stalled_intervals": self.timeline.stalled(),
                "longest_stall_s": self.timeline.longest_stall_s(),
            },
        })
    }

    /// The section as text: events, retries, then the timeline ten intervals a line.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "\nfailures:");
        if self.faults.events.is_empty() {
            let _ = writeln!(out, "  none: every node answered throughout");
        }
        for line in self.faults.lines() {
            let _ = writeln!(out, "  {line}");
        }
        let retries: Vec<String> = self
            .retries
            .iter()
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        let _ = writeln!(out, "  {}", retries.join(" "));
        let t = self.timeline;
        let _ = writeln!(
            out,
            "\nthroughput per {:.0} ms interval from the start of the load (txn/s; {} stalled, longest stall {:.1} s):",
            t.interval_s * 1000.0,
            t.stalled(),
            t.longest_stall_s()
        );
        for (i, chunk) in t.points.chunks(10).enumerate() {
            let start = i as f64 * 10.0 * t.interval_s;
            let rates: Vec<String> = chunk.iter().map(|p| format!("{:>8.0}", p.1)).collect();
            let _ = writeln!(out, "  {start:>6.1} s {}", rates.join(""));
        }
        out
    }

    /// Tells, on stderr, what makes the run fail; whether anything does.
    pub fn fails(&self) -> bool {
        let unasked = self.faults.unasked();
        for e in &unasked {
            eprintln!(
                "error: node {} failed unasked at {:.3} s: {:?}",
                e.node,
                e.at.as_secs_f64(),
                e.kind
            );
        }
        !unasked.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_stall_and_a_silent_node_show() {
        let ms = Duration::from_millis;
        let mut faults = Faults::new(None);
        faults.silent(ms(1200), 2, "no reply".into());
        let timeline = Timeline::from_samples(ms(100), &[(ms(0), 0), (ms(100), 10), (ms(200), 10)]);
        let r = FailureReport {
            faults: &faults,
            timeline: &timeline,
            retries: vec![("resent", 4)],
        };
        let text = r.table();
        assert!(
            text.contains("node 2  stopped answering: no reply"),
            "{text}"
        );
        assert!(text.contains("resent=4"), "{text}");
        assert!(text.contains("1 stalled"), "{text}");
        let j = r.json();
        assert_eq!(j["unasked"], 1);
        assert_eq!(j["events"][0]["kind"], "silent");
        assert_eq!(j["timeline"]["txn_per_s"], json!([100.0, 0.0]));
        assert!(r.fails());
    }
}
