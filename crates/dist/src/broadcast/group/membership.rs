//! Membership of a group: raft ids (address and incarnation) and the change that readmits a
//! member that lost its storage under a new id (raft §6, joint consensus through raft-rs's
//! `ConfChangeV2` with automatic leave).

use std::collections::VecDeque;

use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState,
    Entry, EntryType,
};

use phasedb_net::Addr;

use super::{Group, raft_error};
use crate::broadcast::Delivery;
use crate::broadcast::error::BroadcastError;
use crate::broadcast::wire::GroupMsg;

/// The raft id of the node at `addr` when the group starts (raft reserves 0).
pub fn raft_id(addr: Addr) -> u64 {
    member_id(addr, 0)
}

/// The raft id of the node at `addr` in its `incarnation`: a node that lost its storage rejoins
/// under a new id ([`Group::joining`]), never under one a quorum may remember votes or entries of.
pub fn member_id(addr: Addr, incarnation: u32) -> u64 {
    (u64::from(incarnation) << 32) | (u64::from(addr) + 1)
}

/// The node whose raft id is `id`, whatever its incarnation.
pub fn addr_of(id: u64) -> Addr {
    (id & 0xffff_ffff).saturating_sub(1) as Addr
}

impl Group {
    /// Raft ids of the group's voters as this member knows them (both halves of a joint
    /// configuration).
    pub fn voters(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        v.sort_unstable();
        v
    }

    /// While this member is not a voter under its raft id, asks every other member (only the
    /// leader acts) once per election timeout to let it in.
    pub(super) fn ask_to_join(&mut self, now: u64, out: &mut Vec<(Addr, GroupMsg)>) {
        if !self.joining {
            return;
        }
        if self.raw.raft.prs().conf().voters().contains(self.my_id) {
            self.joining = false;
            return;
        }
        if now < self.join_due {
            return;
        }
        self.join_due = now + self.cfg.tick_ns * self.cfg.election_ticks as u64;
        for &m in self.members.iter().filter(|&&m| m != self.me) {
            out.push((
                m,
                GroupMsg::Join {
                    group: self.id,
                    id: self.my_id,
                },
            ));
        }
    }

    /// True while this member, restarted without storage, waits to be a voter again.
    pub fn is_joining(&self) -> bool {
        self.joining
    }

    /// At the leader: replaces the raft id(s) of `from` in the configuration with `id`, the id
    /// `from` restarted under without its storage. Its old id can no longer vote, so a quorum
    /// never counts a vote or an acknowledgement that `from` forgot. Ignored by followers, while
    /// another change is under way (the joiner asks again) and once `id` is a voter.
    pub fn join(
        &mut self,
        from: Addr,
        id: u64,
        out: &mut Vec<(Addr, GroupMsg)>,
        deliveries: &mut VecDeque<Delivery>,
    ) -> Result<(), BroadcastError> {
        if addr_of(id) != from || !self.members.contains(&from) || from == self.me {
            self.stats.refused_messages += 1;
            return Err(BroadcastError::Misaddressed {
                group: self.id,
                from,
                reason: "join for an id of another node",
            });
        }
        let voters: Vec<u64> = self.raw.raft.prs().conf().voters().ids().iter().collect();
        if !self.is_leader() || voters.contains(&id) || self.raw.raft.has_pending_conf() {
            return Ok(());
        }
        let mut changes: Vec<ConfChangeSingle> = voters
            .iter()
            .filter(|&&v| addr_of(v) == from)
            .map(|&v| {
                let mut c = ConfChangeSingle::default();
                c.set_change_type(ConfChangeType::RemoveNode);
                c.node_id = v;
                c
            })
            .collect();
        let mut add = ConfChangeSingle::default();
        add.set_change_type(ConfChangeType::AddNode);
        add.node_id = id;
        changes.push(add);
        let mut cc = ConfChangeV2::default();
        cc.set_transition(ConfChangeTransition::Auto);
        cc.set_changes(changes.into());
        let proposed = self
            .raw
            .propose_conf_change(Vec::new(), cc)
            .map_err(|e| raft_error(self.id, e));
        self.drive(out, deliveries);
        proposed
    }

    /// The configuration in force at raft index `index` (at least the last snapshot's).
    pub(super) fn conf_at(&self, index: u64) -> ConfState {
        self.confs
            .iter()
            .rev()
            .find(|(i, _)| *i <= index)
            .or(self.confs.front())
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    }

    /// Applies a committed membership change (raft-rs turns a joint one into two entries).
    pub(super) fn apply_conf_change(&mut self, e: &Entry) {
        use protobuf::Message as _;
        let applied = match e.get_entry_type() {
            EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&e.data)
                .ok()
                .and_then(|cc| self.raw.apply_conf_change(&cc).ok()),
            _ => ConfChange::parse_from_bytes(&e.data)
                .ok()
                .and_then(|cc| self.raw.apply_conf_change(&cc).ok()),
        };
        match applied {
            Some(cs) => {
                self.raw.mut_store().set_conf_state(cs.clone());
                self.confs.push_back((e.index, cs));
                self.stats.configuration_changes += 1;
            }
            None => self.stats.undecodable_entries += 1,
        }
    }
}
