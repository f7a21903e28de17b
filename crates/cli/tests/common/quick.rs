//! A quick experiment run (`phasedb experiment NAME --quick`) and what it wrote, for the tests of
//! each paper's experiments.

// Each test crate compiles this module; not every one uses every helper.
#![allow(dead_code)]

use std::process::Command;

use super::TempDir;

/// What a quick run wrote: the CSV, the report, and what the run printed.
pub struct Output {
    /// The CSV's header.
    pub header: Vec<String>,
    /// The CSV's rows, each as long as the header.
    pub rows: Vec<Vec<String>>,
    /// The report (`NAME.md`).
    pub report: String,
    /// What the run printed on stdout.
    pub stdout: String,
    /// Progress and the nodes' messages, shown when an assertion on the counters fails.
    pub stderr: String,
}

impl Output {
    /// The cells of column `name`, one per row.
    pub fn column(&self, name: &str) -> Vec<&str> {
        let i = self
            .header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column `{name}` in {:?}", self.header));
        self.rows.iter().map(|r| r[i].as_str()).collect()
    }

    /// The cells of column `name` as numbers.
    pub fn numbers(&self, name: &str) -> Vec<f64> {
        self.column(name)
            .iter()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: {v}")))
            .collect()
    }
}

/// Runs experiment `name` with `--quick` into a temporary directory and reads what it wrote; fails
/// the test if it exits with an error, writes no SVG or a ragged CSV.
pub fn run_quick(name: &str) -> Output {
    let dir = TempDir::new(name);
    let out = Command::new(env!("CARGO_BIN_EXE_phasedb"))
        .args(["experiment", name, "--quick", "--out"])
        .arg(&dir.0)
        .output()
        .expect("run phasedb");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |ext: &str| {
        std::fs::read_to_string(dir.0.join(format!("{name}.{ext}")))
            .unwrap_or_else(|e| panic!("{name}.{ext}: {e}"))
    };
    let csv = read("csv");
    assert!(read("svg").contains("<svg"), "{name}.svg is not an SVG");
    let mut lines = csv.lines();
    let header: Vec<String> = csv_fields(lines.next().expect("a header"));
    let rows: Vec<Vec<String>> = lines.map(csv_fields).collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{name}: ragged row {r:?}");
    }
    Output {
        header,
        rows,
        report: read("md"),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The fields of one CSV line; a quoted field may hold commas and doubled quotes.
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let field = fields.last_mut().expect("at least one field");
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            _ => field.push(c),
        }
    }
    fields
}
