//! A server's counters as `name value` lines: `phasedb node --stats FILE` writes them at shutdown
//! and the process that started the node reads them back.

use super::ServerStats;

impl ServerStats {
    /// The counters, one `name value` line each.
    pub fn to_text(&self) -> String {
        let s = self;
        [
            ("versions", s.store.versions as u64),
            ("collected", s.store.collected),
            ("pending", s.pending as u64),
            ("ctp_commits", s.ctp_commits),
            ("ctp_aborts", s.ctp_aborts),
            ("fast_commits", s.fast_commits),
            ("gone", s.gone),
            ("commit_checks", s.commit_checks),
            ("locked", s.locked as u64),
            ("lease_expiries", s.lease_expiries),
        ]
        .iter()
        .map(|(k, v)| format!("{k} {v}\n"))
        .collect()
    }

    /// Parses [`ServerStats::to_text`]; refuses unknown names and malformed lines.
    pub fn from_text(text: &str) -> Result<ServerStats, String> {
        let mut s = ServerStats::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line
                .split_once(' ')
                .ok_or_else(|| format!("malformed counter line `{line}`"))?;
            let v: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("counter `{k}` is not a number: `{v}`"))?;
            match k {
                "versions" => s.store.versions = v as usize,
                "collected" => s.store.collected = v,
                "pending" => s.pending = v as usize,
                "ctp_commits" => s.ctp_commits = v,
                "ctp_aborts" => s.ctp_aborts = v,
                "fast_commits" => s.fast_commits = v,
                "gone" => s.gone = v,
                "commit_checks" => s.commit_checks = v,
                "locked" => s.locked = v as usize,
                "lease_expiries" => s.lease_expiries = v,
                _ => return Err(format!("unknown counter `{k}`")),
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_survive_the_text_round_trip() {
        let mut s = ServerStats {
            pending: 3,
            ctp_commits: 7,
            ctp_aborts: 1,
            fast_commits: 9,
            gone: 2,
            commit_checks: 5,
            locked: 4,
            lease_expiries: 6,
            ..ServerStats::default()
        };
        s.store.versions = 11;
        s.store.collected = 13;
        assert_eq!(ServerStats::from_text(&s.to_text()), Ok(s));
        assert!(ServerStats::from_text("pending x").is_err());
        assert!(ServerStats::from_text("bogus 1").is_err());
    }
}
