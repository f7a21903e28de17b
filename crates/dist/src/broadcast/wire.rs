//! The broadcast's message on the wire: a group id and one raft message in raft's own protobuf
//! encoding, carried as bytes inside the node's postcard-encoded message type, or a restarted
//! member's request to join under a new raft id.
//!
//! Decoding the protobuf bytes returns an error for anything malformed; it never panics.

use raft::eraftpb::Message;
use serde::de::{Deserializer, Error as _, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::broadcast::GroupId;
use crate::broadcast::chunks::SnapshotChunk;

/// What the members of a group send each other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupMsg {
    /// One raft message of `group` (P-DUR: the logical partition), protobuf-encoded.
    Raft {
        /// The broadcast group.
        group: GroupId,
        /// The raft message.
        raft: RaftBytes,
    },
    /// A member that lost its storage asks the leader to replace its old raft id in the group's
    /// configuration with `id` ([`crate::broadcast::Broadcast::join_group`]).
    Join {
        /// The broadcast group.
        group: GroupId,
        /// The sender's new raft id.
        id: u64,
    },
    /// One chunk of a raft snapshot message too large to send whole
    /// ([`crate::broadcast::BroadcastConfig::snapshot_chunk_bytes`]).
    Chunk(SnapshotChunk),
}

/// Raw bytes that postcard writes as one length-prefixed run (not byte by byte).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftBytes(pub Vec<u8>);

impl Serialize for RaftBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = RaftBytes;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("raft message bytes")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<RaftBytes, E> {
        Ok(RaftBytes(v.to_vec()))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<RaftBytes, E> {
        Ok(RaftBytes(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RaftBytes, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        if out.len() > phasedb_net::wire::MAX_FRAME {
            return Err(A::Error::custom("raft message too large"));
        }
        Ok(RaftBytes(out))
    }
}

impl<'de> Deserialize<'de> for RaftBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }
}

impl GroupMsg {
    /// Wraps a raft message of `group`.
    pub fn encode(group: GroupId, msg: &Message) -> GroupMsg {
        use protobuf::Message as _;
        // Writing a message built by raft into a Vec cannot fail (no required fields, no I/O).
        let raft = msg.write_to_bytes().unwrap_or_default();
        GroupMsg::Raft {
            group,
            raft: RaftBytes(raft),
        }
    }

    /// The group the message belongs to.
    pub fn group(&self) -> GroupId {
        match self {
            GroupMsg::Raft { group, .. } | GroupMsg::Join { group, .. } => *group,
            GroupMsg::Chunk(c) => c.group,
        }
    }
}

impl RaftBytes {
    /// The raft message inside, or what is wrong with its bytes.
    pub fn decode(&self) -> Result<Message, protobuf::ProtobufError> {
        use protobuf::Message as _;
        Message::parse_from_bytes(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::{Entry, MessageType};
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    fn append() -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = 2;
        m.term = 3;
        m.mut_entries().push(Entry {
            index: 7,
            term: 3,
            data: bytes::Bytes::from_static(b"payload"),
            ..Default::default()
        });
        m
    }

    fn raft_of(msg: &GroupMsg) -> &RaftBytes {
        match msg {
            GroupMsg::Raft { raft, .. } => raft,
            GroupMsg::Join { .. } | GroupMsg::Chunk(_) => panic!("not a raft message"),
        }
    }

    #[test]
    fn a_raft_message_survives_postcard_and_protobuf() {
        let msg = GroupMsg::encode(5, &append());
        let bytes = postcard::to_stdvec(&msg).unwrap();
        assert!(
            bytes.len() < raft_of(&msg).0.len() + 8,
            "bytes travel as one run"
        );
        let back: GroupMsg = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, msg);
        assert_eq!(back.group(), 5);
        assert_eq!(raft_of(&back).decode().unwrap(), append());
    }

    #[test]
    fn truncated_and_random_bytes_never_panic_the_decoders() {
        let msg = GroupMsg::encode(1, &append());
        let wire = postcard::to_stdvec(&msg).unwrap();
        for cut in 0..wire.len() {
            if let Ok(GroupMsg::Raft { raft, .. }) = postcard::from_bytes::<GroupMsg>(&wire[..cut])
            {
                let _ = raft.decode();
            }
        }
        let bytes = &raft_of(&msg).0;
        for cut in 0..bytes.len() {
            let _ = RaftBytes(bytes[..cut].to_vec()).decode();
        }
        let mut rng = SmallRng::seed_from_u64(7);
        let mut refused = 0;
        for _ in 0..2_000 {
            let len = rng.random_range(0..64);
            let junk: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            refused += RaftBytes(junk).decode().is_err() as u32;
        }
        assert!(refused > 0, "random bytes were all accepted");
    }
}
