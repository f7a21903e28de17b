//! A group member's raft storage: raft-rs's `MemStorage` for the hard state and the log, plus the
//! latest application snapshot, which `MemStorage` does not keep.
//!
//! The storage is what a member keeps across a crash (it models the member's durable log); the
//! raft state machine and everything else is rebuilt from it. A snapshot replaces the log up to
//! its index: the log is compacted to `retained_entries` behind it, and a follower behind the
//! compacted prefix receives the snapshot instead (state transfer = snapshot + the log after it).
//!
//! `MemStorage` compacts "up to but not including" an index and only learns a truncated term from
//! a snapshot it installs, so this wrapper keeps the truncation point itself: entries up to
//! `truncated` are gone, and `truncated`'s term stays readable (as the entry `MemStorage` keeps,
//! or as the installed snapshot's metadata).

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError, storage::MemStorage};

/// What a raft snapshot's data carries besides the application's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotBody {
    /// Delivery index of the last payload of the snapshot's raft entry: payloads of the entries
    /// after it are numbered from `log_seq + 1`.
    pub log_seq: u64,
    /// Delivery index the application's state reflects (at least `log_seq`): payloads up to it
    /// are in the state and are not delivered again.
    pub app_seq: u64,
    /// The application's state, opaque here.
    pub state: Bytes,
}

impl SnapshotBody {
    /// The snapshot data: `log_seq`, `app_seq` (little endian `u64`s), then the state.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.state.len());
        out.extend_from_slice(&self.log_seq.to_le_bytes());
        out.extend_from_slice(&self.app_seq.to_le_bytes());
        out.extend_from_slice(&self.state);
        out
    }

    /// Reads snapshot data; `None` when it is too short or its indexes are inconsistent.
    pub fn decode(data: &Bytes) -> Option<SnapshotBody> {
        if data.len() < 16 {
            return None;
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&data[0..8]);
        let log_seq = u64::from_le_bytes(a);
        a.copy_from_slice(&data[8..16]);
        let app_seq = u64::from_le_bytes(a);
        (app_seq >= log_seq).then(|| SnapshotBody {
            log_seq,
            app_seq,
            state: data.slice(16..),
        })
    }
}

/// A member's durable raft state: hard state, log and latest snapshot.
#[derive(Clone)]
pub struct GroupStorage {
    mem: MemStorage,
    snapshot: Snapshot,
    truncated: u64,
}

impl GroupStorage {
    /// Empty storage for a group whose voters are `voters` (raft ids).
    pub fn new(voters: Vec<u64>) -> Self {
        GroupStorage {
            mem: MemStorage::new_with_conf_state((voters, Vec::<u64>::new())),
            snapshot: Snapshot::default(),
            truncated: 0,
        }
    }

    /// The latest snapshot (empty, index 0, before the first).
    pub fn snapshot_ref(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The voters of the group.
    pub fn conf_state(&self) -> ConfState {
        self.mem
            .initial_state()
            .map(|s| s.conf_state)
            .unwrap_or_default()
    }

    /// Persists the group's configuration after a membership change.
    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.mem.wl().set_conf_state(cs);
    }

    /// Persists entries raft handed over in a ready.
    pub fn append(&mut self, entries: &[Entry]) -> raft::Result<()> {
        self.mem.wl().append(entries)
    }

    /// Persists a new hard state.
    pub fn set_hard_state(&mut self, hs: HardState) {
        self.mem.wl().set_hardstate(hs);
    }

    /// Persists an advanced commit index.
    pub fn set_commit(&mut self, commit: u64) {
        self.mem.wl().mut_hard_state().commit = commit;
    }

    /// Installs a snapshot received from the leader: the log before it is gone.
    pub fn install(&mut self, snapshot: Snapshot) -> raft::Result<()> {
        let index = snapshot.get_metadata().index;
        self.mem.wl().apply_snapshot(snapshot.clone())?;
        self.snapshot = snapshot;
        self.truncated = index;
        Ok(())
    }

    /// Records this member's own snapshot and compacts the log to `retained` entries behind it.
    /// The snapshot's index must be applied (so persisted and committed).
    pub fn record(&mut self, snapshot: Snapshot, retained: u64) -> raft::Result<()> {
        let index = snapshot.get_metadata().index;
        self.snapshot = snapshot;
        let keep_from = index.saturating_sub(retained);
        if keep_from > self.truncated {
            self.mem.wl().compact(keep_from)?;
            self.truncated = keep_from;
        }
        Ok(())
    }

    /// The last index whose entry is gone from the log.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }
}

impl Storage for GroupStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.truncated {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.truncated {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.truncated + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Ok(self.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            ..Default::default()
        }
    }

    #[test]
    fn compaction_keeps_the_truncated_term_and_hides_earlier_entries() {
        let mut s = GroupStorage::new(vec![1]);
        s.append(&(1..=10).map(|i| entry(i, 1 + i / 5)).collect::<Vec<_>>())
            .unwrap();
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 8;
        snap.mut_metadata().term = 2;
        s.record(snap, 3).unwrap();
        assert_eq!(s.first_index().unwrap(), 6);
        assert_eq!(s.term(5).unwrap(), 2);
        assert!(s.term(4).is_err());
        assert!(
            s.entries(5, 7, None, GetEntriesContext::empty(false))
                .is_err()
        );
        let got = s
            .entries(6, 11, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(
            got.iter().map(|e| e.index).collect::<Vec<_>>(),
            (6..=10).collect::<Vec<_>>()
        );
        assert_eq!(s.snapshot(0, 2).unwrap().get_metadata().index, 8);
    }

    #[test]
    fn snapshot_bodies_round_trip_and_bad_ones_are_refused() {
        let b = SnapshotBody {
            log_seq: 4,
            app_seq: 6,
            state: Bytes::from_static(b"state"),
        };
        assert_eq!(
            SnapshotBody::decode(&Bytes::from(b.encode())),
            Some(b.clone())
        );
        let data = b.encode();
        for cut in 0..16 {
            assert_eq!(
                SnapshotBody::decode(&Bytes::copy_from_slice(&data[..cut])),
                None
            );
        }
        let backwards = SnapshotBody {
            log_seq: 7,
            app_seq: 6,
            ..b
        };
        assert_eq!(SnapshotBody::decode(&Bytes::from(backwards.encode())), None);
    }
}
