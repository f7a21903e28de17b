//! Writes the rows of a sweep as CSV: every parameter, then the metrics, the consistency check and
//! whether the point counts.

use std::fmt::Write;

use super::sweep::Row;

/// The metric columns that follow the parameters.
pub const METRIC_COLUMNS: [&str; 8] = [
    "throughput",
    "abort_rate",
    "p50_us",
    "p99_us",
    "p999_us",
    "committed",
    "check",
    "status",
];

/// Quotes a field if it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Parameter names over all rows, in order of first appearance.
fn param_columns(rows: &[Row]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for r in rows {
        for (k, _) in &r.params {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    cols
}

/// The CSV text: a header line and one line per row.
pub fn to_csv(rows: &[Row]) -> String {
    let params = param_columns(rows);
    let mut out = String::new();
    let header: Vec<&str> = params
        .iter()
        .map(String::as_str)
        .chain(METRIC_COLUMNS)
        .collect();
    let _ = writeln!(out, "{}", header.join(","));
    for r in rows {
        let m = &r.metrics;
        let mut fields: Vec<String> = params
            .iter()
            .map(|k| field(r.param(k).unwrap_or("")))
            .collect();
        fields.extend([
            format!("{:.1}", m.throughput),
            format!("{:.6}", m.abort_rate),
            format!("{:.1}", m.p50_us),
            format!("{:.1}", m.p99_us),
            format!("{:.1}", m.p999_us),
            m.committed.to_string(),
            field(&r.check),
            field(&match &r.applicable {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("n/a: {e}"),
            }),
        ]);
        let _ = writeln!(out, "{}", fields.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::sweep::Metrics;

    fn row(params: &[(&str, &str)], applicable: Result<(), String>) -> Row {
        Row {
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            series: "s".into(),
            x: 1.0,
            metrics: Metrics {
                throughput: 10.0,
                committed: 20,
                ..Metrics::default()
            },
            rounds: vec![10.0],
            check: "ok".into(),
            applicable,
        }
    }

    #[test]
    fn header_is_the_union_of_parameters_and_fields_are_quoted() {
        let rows = [
            row(&[("protocol", "occ")], Err("a, \"b\"".into())),
            row(&[("protocol", "occ"), ("rows", "10")], Ok(())),
        ];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "protocol,rows,throughput,abort_rate,p50_us,p99_us,p999_us,committed,check,status"
        );
        assert_eq!(
            lines[1],
            "occ,,10.0,0.000000,0.0,0.0,0.0,20,ok,\"n/a: a, \"\"b\"\"\""
        );
        assert!(lines[2].starts_with("occ,10,10.0,"));
        assert!(lines[2].ends_with(",ok,ok"));
    }
}
