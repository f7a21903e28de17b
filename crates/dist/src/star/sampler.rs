//! How the STAR benchmark reads every node's counters once per interval without stalling on a
//! node that died: a query left unanswered stays pending into the next intervals (the node counts
//! with what it said last), and only a query unanswered for the answer timeout makes the node
//! silent. A silent node is asked again every answer timeout; when a restarted process answers
//! (§7.2), its counters start a new series and what the old process had committed is kept.

use std::time::{Duration, Instant};

use phasedb_net::Addr;

use crate::ramp::bench::faults::Faults;
use crate::star::bench::since;
use crate::star::client::{Client, ClientError, Ticket};
use crate::star::msg::{Answer, Query};
use crate::star::stats::{FallBackStats, RecoveryStats, StarStats};

/// The cluster's fall-back to Dist-OCC once no full replica was left (§7.2), as the benchmark saw
/// it.
#[derive(Clone, Copy, Debug)]
pub struct FallBackSeen {
    /// When a node first said it had fallen back (time since the load started).
    pub seen: Duration,
    /// The node that said so.
    pub node: Addr,
    /// What it said: the first Dist-OCC group, the failures announced, when it switched.
    pub stats: FallBackStats,
}

/// A restarted node's way back, as the benchmark saw it.
#[derive(Clone, Debug)]
pub struct Reincarnation {
    /// The node.
    pub node: Addr,
    /// When its new process first answered (time since the load started).
    pub answered: Duration,
    /// When the benchmark first saw it a member of the cycle again, with its partitions copied.
    pub recovered: Option<Duration>,
    /// Its recovery counters when last heard.
    pub recovery: RecoveryStats,
}

/// Every node's latest counters, read without waiting on a dead node.
pub(crate) struct Sampler<'c> {
    client: &'c Client,
    timeout: Duration,
    pending: Vec<Option<(Ticket<'c, Answer>, Instant)>>,
    /// Per node, whether it answers.
    pub live: Vec<bool>,
    /// Per node, the counters its current process gave last.
    pub latest: Vec<StarStats>,
    /// Per node, transactions its earlier processes committed.
    retired: Vec<u64>,
    /// Per node, its counters at the window's start (zero for a process started in the window).
    first: Option<Vec<StarStats>>,
    /// Per node, what its earlier processes did in the window.
    carried: Vec<StarStats>,
    /// Restarted nodes, in the order they came back.
    pub reincarnations: Vec<Reincarnation>,
    /// The fall-back to Dist-OCC, once a node said it runs it.
    pub fall_back: Option<FallBackSeen>,
}

impl<'c> Sampler<'c> {
    /// Starts from `started`, every node's answer to the load's start.
    pub fn new(client: &'c Client, started: Vec<StarStats>, timeout: Duration) -> Sampler<'c> {
        let n = started.len();
        Sampler {
            client,
            timeout,
            pending: (0..n).map(|_| None).collect(),
            live: vec![true; n],
            latest: started,
            retired: vec![0; n],
            first: None,
            carried: vec![StarStats::default(); n],
            reincarnations: Vec::new(),
            fall_back: None,
        }
    }

    /// Transactions committed so far by every node (a dead one with what it said last).
    pub fn committed(&self) -> u64 {
        self.latest.iter().map(StarStats::committed).sum::<u64>() + self.retired.iter().sum::<u64>()
    }

    /// Transactions every node acknowledged over the run, every process of it added up: each
    /// live node's with its counters at the end (`last`, `None` for a node that stopped), a
    /// stopped one's with what it said last.
    pub fn acknowledged(&self, last: &[Option<StarStats>]) -> u64 {
        (0..self.latest.len())
            .map(|n| {
                let seen = self.latest[n].committed();
                let end = match last.get(n).and_then(Option::as_ref) {
                    Some(s) if s.committed() >= seen => s.committed(),
                    // A restarted process this sampler never heard from.
                    Some(s) => seen + s.committed(),
                    None => seen,
                };
                self.retired[n] + end
            })
            .sum()
    }

    /// Asks every node without a pending query for its counters, and takes the answers that come
    /// within `wait`. `fresh` (a window's ends) asks every live node anew and waits up to the
    /// answer timeout, so the counters are as of now. `now` is the run's clock, for `faults`.
    pub fn read(&mut self, wait: Duration, fresh: bool, faults: &mut Faults, now: Duration) {
        let sent_now = Instant::now();
        let wait = if fresh { self.timeout } else { wait };
        for (n, slot) in self.pending.iter_mut().enumerate() {
            // A silent node's query is sent again after each timeout: a restarted process
            // answers only queries sent after it came up.
            let stale = slot.as_ref().is_some_and(|(_, sent)| {
                if self.live[n] {
                    fresh
                } else {
                    sent.elapsed() >= self.timeout
                }
            });
            if slot.is_none() || stale {
                *slot = match self.client.send_query(n as Addr, Query::Stats) {
                    Ok(t) => Some((t, sent_now)),
                    Err(_) => None,
                };
            }
        }
        let deadline = sent_now + wait;
        for n in 0..self.pending.len() {
            let Some((ticket, sent)) = &self.pending[n] else {
                continue;
            };
            let sent = *sent;
            let answer = ticket.poll(deadline.saturating_duration_since(Instant::now()));
            match answer {
                Some(Ok(Answer::Stats(s))) => {
                    self.pending[n] = None;
                    self.take(n, *s, faults, now);
                }
                Some(other) => {
                    self.pending[n] = None;
                    if self.live[n] {
                        self.live[n] = false;
                        faults.silent(now, n, reason(other, n as Addr));
                    }
                }
                None if self.live[n] && sent.elapsed() >= self.timeout => {
                    self.live[n] = false;
                    let e = ClientError::Timeout {
                        node: n as Addr,
                        timeout: self.timeout,
                    };
                    faults.silent(now, n, format!("node {n}: {e}"));
                }
                None => {}
            }
        }
    }

    fn take(&mut self, n: usize, s: StarStats, faults: &mut Faults, now: Duration) {
        let old = &self.latest[n];
        // A process that answers after silence, or with fewer commits than before, is a new one.
        if !self.live[n] || s.committed() < old.committed() {
            self.retired[n] += old.committed();
            if let Some(first) = &mut self.first {
                self.carried[n].merge(&since(old, &first[n]));
                first[n] = StarStats::default();
            }
            self.live[n] = true;
            faults.answering(now, n);
            self.reincarnations.push(Reincarnation {
                node: n as Addr,
                answered: now,
                recovered: None,
                recovery: s.recovery,
            });
        }
        self.heard(n, &s, now);
        self.latest[n] = s;
    }

    /// Opens the measured window at the counters read last.
    pub fn open_window(&mut self) {
        self.first = Some(self.latest.clone());
        self.carried = vec![StarStats::default(); self.latest.len()];
    }

    /// Per node, what it did in the window up to its latest counters, every process added up.
    pub fn window(&self) -> Vec<StarStats> {
        let first = self.first.as_ref().expect("the window is open");
        (0..self.latest.len())
            .map(|n| {
                let mut w = self.carried[n].clone();
                w.merge(&since(&self.latest[n], &first[n]));
                w
            })
            .collect()
    }

    /// Notes what a restarted node said of its recovery, and whether the node fell back to
    /// Dist-OCC, in an answer read here or elsewhere (the quiesce).
    pub fn heard(&mut self, n: usize, s: &StarStats, now: Duration) {
        if self.fall_back.is_none()
            && let Some(f) = s.fall_back
        {
            self.fall_back = Some(FallBackSeen {
                seen: now,
                node: n as Addr,
                stats: f,
            });
        }
        if let Some(r) = self
            .reincarnations
            .iter_mut()
            .rev()
            .find(|r| r.node == n as Addr)
        {
            r.recovery = s.recovery;
            if r.recovered.is_none() && recovered(&s.recovery) {
                r.recovered = Some(now);
            }
        }
    }

    /// Whether every restarted node still `live` is back in the cycle with its partitions.
    pub fn restarted_recovered(&self, live: &[bool]) -> bool {
        self.reincarnations
            .iter()
            .all(|r| !live[r.node as usize] || r.recovered.is_some())
    }
}

/// Whether a restarted node is a member again and has every partition copied.
fn recovered(r: &RecoveryStats) -> bool {
    r.rejoined_phase != 0 && r.copied_ns != 0
}

fn reason(answer: Result<Answer, ClientError>, n: Addr) -> String {
    match answer {
        Ok(other) => format!("node {n} answered {other:?} to a counters query"),
        Err(e) => format!("node {n}: {e}"),
    }
}
