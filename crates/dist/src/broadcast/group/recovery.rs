//! Snapshots and recovery of a group member: the application's state recorded as the raft
//! snapshot (the log behind it compacted), a restart from storage, and the restore of a snapshot
//! received from the leader (state transfer = snapshot + the log after it).

use std::collections::VecDeque;

use bytes::Bytes;
use raft::RawNode;
use raft::Storage;
use raft::eraftpb::Snapshot;

use super::{Group, raft_config, raft_error};
use crate::broadcast::Delivery;
use crate::broadcast::batch::BatchBuilder;
use crate::broadcast::error::BroadcastError;
use crate::broadcast::storage::SnapshotBody;

impl Group {
    /// Records the application's state of this group, which reflects every payload up to number
    /// `index`, as the group's snapshot, and compacts the log behind it. Returns false when the
    /// snapshot would not be newer than the one held (nothing changes).
    pub fn offer_snapshot(&mut self, index: u64, state: Bytes) -> Result<bool, BroadcastError> {
        let delivered = self.delivered();
        if index > delivered {
            return Err(BroadcastError::SnapshotAhead {
                group: self.id,
                index,
                delivered,
            });
        }
        let Some(&(entry, log_seq)) = self.boundaries.iter().rev().find(|(_, s)| *s <= index)
        else {
            return Ok(false);
        };
        if entry <= self.snapshot_index() {
            return Ok(false);
        }
        let term = self
            .raw
            .store()
            .term(entry)
            .map_err(|e| raft_error(self.id, e))?;
        let body = SnapshotBody {
            log_seq,
            app_seq: index.max(log_seq),
            state,
        };
        let mut snap = Snapshot {
            data: Bytes::from(body.encode()),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = entry;
        meta.term = term;
        meta.set_conf_state(self.conf_at(entry));
        let retained = self.cfg.retained_entries;
        self.raw
            .mut_store()
            .record(snap, retained)
            .map_err(|e| raft_error(self.id, e))?;
        while self.boundaries.front().is_some_and(|&(i, _)| i <= entry) {
            self.boundaries.pop_front();
        }
        while self.confs.len() > 1 && self.confs[1].0 <= entry {
            self.confs.pop_front();
        }
        self.stats.snapshots_taken += 1;
        Ok(true)
    }

    /// The member crashed: everything but its storage (the durable log, hard state and snapshot)
    /// is forgotten, and it restarts from that storage. Its application starts over too: it is
    /// handed the snapshot (a [`Delivery::Restore`]; an empty state at index 0 if there is none)
    /// and then the entries after it, numbered as before.
    pub fn restart(&mut self, deliveries: &mut VecDeque<Delivery>) -> Result<(), BroadcastError> {
        let mut store = self.raw.store().clone();
        let snap = store.snapshot_ref().clone();
        let applied = snap.get_metadata().index;
        // Raft restores its configuration from storage and then replays the entries after the
        // snapshot, membership changes among them: start from the configuration at the snapshot.
        let conf = if applied > 0 {
            snap.get_metadata().get_conf_state().clone()
        } else {
            self.initial_conf.clone()
        };
        store.set_conf_state(conf.clone());
        self.raw = RawNode::new(
            &raft_config(&self.cfg, self.my_id, applied),
            store,
            &self.logger,
        )
        .map_err(|e| raft_error(self.id, e))?;
        self.confs = VecDeque::from([(applied, conf)]);
        self.join_due = 0;
        self.incarnation += 1;
        self.observed.0 = u64::MAX;
        self.pin_election_timeout();
        self.next_tick = None;
        self.batch = BatchBuilder::default();
        self.batch_number = 0;
        self.inflight.clear();
        self.boundaries.clear();
        self.applied = applied;
        self.next_seq = 1;
        self.skip_to = 0;
        if applied > 0 {
            self.restore(&snap, deliveries);
        } else {
            // No snapshot yet: the application starts from its empty state.
            deliveries.push_back(Delivery::Restore {
                group: self.id,
                index: 0,
                state: Bytes::new(),
            });
        }
        Ok(())
    }

    /// Hands the application a snapshot's state and numbers the entries after it.
    pub(super) fn restore(&mut self, snap: &Snapshot, deliveries: &mut VecDeque<Delivery>) {
        let body = SnapshotBody::decode(&snap.data).unwrap_or(SnapshotBody {
            log_seq: 0,
            app_seq: 0,
            state: Bytes::new(),
        });
        self.applied = snap.get_metadata().index;
        // Entries after the snapshot's are numbered from its entry's last payload on; those the
        // state already reflects (up to `app_seq`) are skipped.
        self.next_seq = body.log_seq + 1;
        self.skip_to = body.app_seq;
        self.boundaries.clear();
        self.confs = VecDeque::from([(self.applied, snap.get_metadata().get_conf_state().clone())]);
        deliveries.push_back(Delivery::Restore {
            group: self.id,
            index: body.app_seq,
            state: body.state,
        });
    }
}
