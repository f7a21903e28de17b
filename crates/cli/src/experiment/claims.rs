//! A claim of a paper checked against a run: what the paper says, what was measured, and the
//! verdict computed from the measurement.

use std::fmt;

/// Whether a claim holds on this machine.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The measurement agrees with the claim.
    Holds,
    /// The measurement contradicts the claim.
    DoesNotHold,
    /// The run has no data to decide (a protocol missing, no contention...).
    NotChecked(String),
}

impl Verdict {
    /// `Holds` if `ok`, else `DoesNotHold`.
    pub fn from_bool(ok: bool) -> Verdict {
        if ok {
            Verdict::Holds
        } else {
            Verdict::DoesNotHold
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Holds => write!(f, "holds on this machine"),
            Verdict::DoesNotHold => write!(f, "does not hold on this machine"),
            Verdict::NotChecked(why) => write!(f, "not checked ({why})"),
        }
    }
}

/// One claim and its verdict.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The claim in one line.
    pub statement: String,
    /// What the paper measured for it.
    pub paper: String,
    /// What this run measured, with the numbers the verdict uses.
    pub measured: String,
    /// The verdict.
    pub verdict: Verdict,
}

impl Claim {
    /// `"Verdict: holds on this machine — <statement>"`.
    pub fn verdict_line(&self) -> String {
        format!("Verdict: {} — {}", self.verdict, self.statement)
    }
}

/// `a / b`, or `None` when `b` is zero.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// The median of `v` (the upper one of an even count; `None` if empty).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// A ratio as "1.23x", or "n/a".
pub fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{r:.2}x"))
}

/// The range of per-round ratios as " (rounds 0.91–1.08x)", or nothing for fewer than two rounds:
/// beside a ratio of medians it shows how far one round could stray from it.
pub fn spread(ratios: &[f64]) -> String {
    if ratios.len() < 2 {
        return String::new();
    }
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(" (rounds {lo:.2}–{hi:.2}x)")
}

/// A claim that every `(name, measured ratio)` lies in `range`; not checked when a ratio is missing.
pub fn ratio_claim(
    statement: &str,
    paper: &str,
    what: &str,
    ratios: &[(String, Option<f64>)],
    range: std::ops::RangeInclusive<f64>,
) -> Claim {
    let measured = format!(
        "{what}: {}",
        ratios
            .iter()
            .map(|(n, r)| format!("{n} {}", times(*r)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let missing: Vec<&str> = ratios
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(n, _)| n.as_str())
        .collect();
    let verdict = if ratios.is_empty() {
        Verdict::NotChecked("nothing measured".into())
    } else if !missing.is_empty() {
        Verdict::NotChecked(format!("no measurement for {}", missing.join(", ")))
    } else {
        Verdict::from_bool(
            ratios
                .iter()
                .all(|(_, r)| r.is_some_and(|r| range.contains(&r))),
        )
    };
    Claim {
        statement: statement.into(),
        paper: paper.into(),
        measured,
        verdict,
    }
}

/// `a / b` for two optional throughputs.
pub fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    ratio(a?, b?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_lines_say_holds_or_not() {
        let mut c = Claim {
            statement: "fine is faster".into(),
            paper: String::new(),
            measured: String::new(),
            verdict: Verdict::from_bool(true),
        };
        assert_eq!(
            c.verdict_line(),
            "Verdict: holds on this machine — fine is faster"
        );
        c.verdict = Verdict::from_bool(false);
        assert!(c.verdict_line().starts_with("Verdict: does not hold"));
        assert_eq!(times(ratio(1.0, 0.0)), "n/a");
        assert_eq!(times(ratio(3.0, 2.0)), "1.50x");
    }

    #[test]
    fn the_spread_of_round_ratios_gives_their_range() {
        assert_eq!(spread(&[1.0, 0.9, 1.13]), " (rounds 0.90–1.13x)");
        assert_eq!(spread(&[1.0]), "");
        assert_eq!(spread(&[]), "");
    }
}
