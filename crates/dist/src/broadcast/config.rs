//! How a broadcast member runs: raft timing, batching of proposals and log compaction.

use crate::broadcast::error::BroadcastError;

/// Settings shared by every group of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct BroadcastConfig {
    /// Length of one raft tick in nanoseconds of the transport's clock.
    pub tick_ns: u64,
    /// Ticks without a leader's word before a follower campaigns (raft randomises it in
    /// `[election_ticks, 2 * election_ticks)`).
    pub election_ticks: usize,
    /// Ticks between a leader's heartbeats; below `election_ticks`.
    pub heartbeat_ticks: usize,
    /// A batch is proposed as soon as it holds this many payload bytes.
    pub batch_bytes: usize,
    /// Batches of this member proposed but not yet delivered, beyond which new proposals wait to
    /// be batched (until the next tick or until the batch is full). Few in flight, large batches.
    pub max_inflight_batches: usize,
    /// Most payload bytes gathered and not yet proposed; `propose` refuses more.
    pub max_pending_bytes: usize,
    /// A proposed batch not delivered after this long (ns) is presumed lost (its leader failed)
    /// and stops counting as in flight. Raft proposals are not retried: the application re-proposes.
    pub proposal_timeout_ns: u64,
    /// Entries applied since the last snapshot at which
    /// [`crate::broadcast::Broadcast::snapshots_due`] asks the application for its state.
    pub snapshot_entries: u64,
    /// Entries kept in the log behind a snapshot, so a follower slightly behind catches up from
    /// the log instead of a state transfer.
    pub retained_entries: u64,
    /// Most bytes of entries in one append message.
    pub max_message_bytes: u64,
    /// A snapshot message larger than this is sent in chunks of at most this many bytes
    /// (`chunks.rs`), so a state larger than a transport frame still transfers.
    pub snapshot_chunk_bytes: usize,
    /// The group's first member campaigns when it starts with an empty log, so a fresh group elects
    /// a leader without waiting for an election timeout.
    pub campaign_on_start: bool,
    /// Seed of the members' election timeouts (mixed with group and member), so a simulated run
    /// replays exactly.
    pub seed: u64,
}

impl Default for BroadcastConfig {
    /// 10 ms ticks, elections after 100–200 ms, heartbeats every 20 ms, 64 KiB batches with two in
    /// flight, a snapshot every 10,000 entries keeping 1,000 behind it.
    fn default() -> Self {
        BroadcastConfig {
            tick_ns: 10_000_000,
            election_ticks: 10,
            heartbeat_ticks: 2,
            batch_bytes: 64 << 10,
            max_inflight_batches: 2,
            max_pending_bytes: 64 << 20,
            proposal_timeout_ns: 1_000_000_000,
            snapshot_entries: 10_000,
            retained_entries: 1_000,
            max_message_bytes: 1 << 20,
            snapshot_chunk_bytes: 1 << 20,
            campaign_on_start: true,
            seed: 0,
        }
    }
}

impl BroadcastConfig {
    /// Refuses settings raft cannot run with.
    pub fn validate(&self) -> Result<(), BroadcastError> {
        let bad = |what: &'static str| Err(BroadcastError::Config(what));
        if self.tick_ns == 0 {
            return bad("tick_ns must be positive");
        }
        if self.heartbeat_ticks == 0 || self.heartbeat_ticks >= self.election_ticks {
            return bad("heartbeat_ticks must be in 1..election_ticks");
        }
        if self.batch_bytes == 0 || self.max_inflight_batches == 0 {
            return bad("batch_bytes and max_inflight_batches must be positive");
        }
        if self.max_pending_bytes < self.batch_bytes {
            return bad("max_pending_bytes must be at least batch_bytes");
        }
        if self.snapshot_entries == 0 {
            return bad("snapshot_entries must be positive");
        }
        if self.max_message_bytes == 0 {
            return bad("max_message_bytes must be positive");
        }
        if self.snapshot_chunk_bytes == 0
            || self.snapshot_chunk_bytes > phasedb_net::wire::MAX_FRAME / 2
        {
            return bad("snapshot_chunk_bytes must be 1..=8388608 (half a transport frame)");
        }
        Ok(())
    }
}
