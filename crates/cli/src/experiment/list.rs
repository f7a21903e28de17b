//! The text of `phasedb experiment --list` and of the "what is available" hint.

use std::fmt::Write;

use super::registry;

/// One line per experiment: name, availability, paper and setup.
pub fn table() -> String {
    let name_w = registry::ALL
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(4);
    let paper_w = registry::ALL
        .iter()
        .map(|e| e.paper.len())
        .max()
        .unwrap_or(5);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:name_w$}  {:9}  {:paper_w$}  SETUP",
        "NAME", "AVAILABLE", "PAPER"
    );
    for e in registry::ALL {
        let available = if e.run.is_some() { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "{:name_w$}  {available:9}  {:paper_w$}  {}",
            e.name, e.paper, e.setup
        );
    }
    let _ = writeln!(
        out,
        "\n{} experiments; run one with `phasedb experiment NAME [--quick] [--out DIR]`.",
        registry::ALL.len()
    );
    out
}

/// "available in this build: a, b" (or a note that none is).
pub fn available_line() -> String {
    let names = registry::available();
    if names.is_empty() {
        "no experiment is available in this build".into()
    } else {
        format!(
            "available in this build: {} (see `phasedb experiment --list`)",
            names.join(", ")
        )
    }
}
