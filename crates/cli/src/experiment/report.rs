//! Builds the Markdown report of an experiment: headings, paragraphs, tables and claims.

use std::fmt::Write;

use super::claims::Claim;

/// A Markdown document under construction.
#[derive(Default)]
pub struct Report {
    text: String,
}

impl Report {
    /// A report titled `title`.
    pub fn new(title: &str) -> Report {
        let mut r = Report::default();
        let _ = writeln!(r.text, "# {title}\n");
        r
    }

    /// A second-level heading.
    pub fn heading(&mut self, h: &str) -> &mut Self {
        let _ = writeln!(self.text, "## {h}\n");
        self
    }

    /// A paragraph.
    pub fn para(&mut self, p: &str) -> &mut Self {
        let _ = writeln!(self.text, "{p}\n");
        self
    }

    /// A bulleted list.
    pub fn bullets<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        for i in items {
            let _ = writeln!(self.text, "- {}", i.as_ref());
        }
        self.text.push('\n');
        self
    }

    /// A table with a header row.
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) -> &mut Self {
        let _ = writeln!(self.text, "| {} |", header.join(" | "));
        let _ = writeln!(self.text, "|{}", "---|".repeat(header.len()));
        for r in rows {
            let _ = writeln!(self.text, "| {} |", r.join(" | "));
        }
        self.text.push('\n');
        self
    }

    /// A claim: its statement, the paper's numbers, the measurement and the verdict line.
    pub fn claim(&mut self, n: usize, c: &Claim) -> &mut Self {
        let _ = writeln!(self.text, "### Claim {n}: {}\n", c.statement);
        let _ = writeln!(self.text, "Paper: {}\n", c.paper);
        let _ = writeln!(self.text, "Measured: {}\n", c.measured);
        let _ = writeln!(self.text, "{}\n", c.verdict_line());
        self
    }

    /// The finished Markdown text.
    pub fn finish(&self) -> String {
        self.text.trim_end().to_string() + "\n"
    }
}
