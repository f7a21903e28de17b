//! Why a broadcast call was refused.

use phasedb_net::Addr;

use crate::broadcast::GroupId;

/// An error of the broadcast substrate; the call that returns it changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum BroadcastError {
    /// A setting is out of range.
    #[error("bad broadcast setting: {0}")]
    Config(&'static str),
    /// No group with this id runs on this node.
    #[error("no broadcast group {0} on this node")]
    UnknownGroup(GroupId),
    /// A group with this id was already added.
    #[error("broadcast group {0} already exists")]
    DuplicateGroup(GroupId),
    /// A group's member list is empty, has duplicates, lacks this node or names a client address.
    #[error("bad member list for group {0}: {1}")]
    Members(GroupId, &'static str),
    /// A message's raft bytes did not decode.
    #[error("undecodable raft message for group {group} from {from}: {reason}")]
    Decode {
        /// The group named by the envelope.
        group: GroupId,
        /// The sender.
        from: Addr,
        /// What failed.
        reason: String,
    },
    /// A message's raft header does not match its envelope (sender, addressee or membership).
    #[error("raft message for group {group} from {from} refused: {reason}")]
    Misaddressed {
        /// The group named by the envelope.
        group: GroupId,
        /// The sender.
        from: Addr,
        /// What did not match.
        reason: &'static str,
    },
    /// Raft refused the message.
    #[error("raft refused a message for group {group}: {reason}")]
    Raft {
        /// The group.
        group: GroupId,
        /// Raft's error.
        reason: String,
    },
    /// Too many payload bytes wait to be proposed.
    #[error("group {group}: {pending} bytes already wait to be proposed (limit {limit})")]
    Backlog {
        /// The group.
        group: GroupId,
        /// Bytes waiting.
        pending: usize,
        /// The limit ([`crate::broadcast::BroadcastConfig::max_pending_bytes`]).
        limit: usize,
    },
    /// A snapshot was offered at an index this member has not delivered yet.
    #[error("group {group}: snapshot at index {index} offered, but only {delivered} delivered")]
    SnapshotAhead {
        /// The group.
        group: GroupId,
        /// The index offered.
        index: u64,
        /// The last index delivered.
        delivered: u64,
    },
}
