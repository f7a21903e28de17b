//! The broadcast's message on the wire: a group id and one raft message in raft's own protobuf
//! encoding, carried as bytes inside the node's postcard-encoded message type.
//!
//! Decoding the protobuf bytes returns an error for anything malformed; it never panics.

use raft::eraftpb::Message;
use serde::de::{Deserializer, Error as _, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::broadcast::GroupId;

/// One raft message of one group, as it travels between nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftMsg {
    /// The broadcast group (P-DUR: the logical partition).
    pub group: GroupId,
    /// The raft message, protobuf-encoded.
    pub raft: RaftBytes,
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

impl RaftMsg {
    /// Wraps a raft message of `group`.
    pub fn encode(group: GroupId, msg: &Message) -> RaftMsg {
        use protobuf::Message as _;
        // Writing a message built by raft into a Vec cannot fail (no required fields, no I/O).
        let raft = msg.write_to_bytes().unwrap_or_default();
        RaftMsg {
            group,
            raft: RaftBytes(raft),
        }
    }

    /// The raft message inside, or what is wrong with its bytes.
    pub fn decode(&self) -> Result<Message, protobuf::ProtobufError> {
        use protobuf::Message as _;
        Message::parse_from_bytes(&self.raft.0)
    }

    /// Bytes of the raft message.
    pub fn len(&self) -> usize {
        self.raft.0.len()
    }

    /// True for an empty raft message (which decodes to raft's default message).
    pub fn is_empty(&self) -> bool {
        self.raft.0.is_empty()
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

    #[test]
    fn a_raft_message_survives_postcard_and_protobuf() {
        let msg = RaftMsg::encode(5, &append());
        let bytes = postcard::to_stdvec(&msg).unwrap();
        assert!(bytes.len() < msg.len() + 8, "bytes travel as one run");
        let back: RaftMsg = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, msg);
        assert_eq!(back.decode().unwrap(), append());
    }

    #[test]
    fn truncated_and_random_bytes_never_panic_the_decoders() {
        let msg = RaftMsg::encode(1, &append());
        let wire = postcard::to_stdvec(&msg).unwrap();
        for cut in 0..wire.len() {
            if let Ok(m) = postcard::from_bytes::<RaftMsg>(&wire[..cut]) {
                let _ = m.decode();
            }
        }
        for cut in 0..msg.len() {
            let short = RaftMsg {
                group: 1,
                raft: RaftBytes(msg.raft.0[..cut].to_vec()),
            };
            let _ = short.decode();
        }
        let mut rng = SmallRng::seed_from_u64(7);
        let mut refused = 0;
        for _ in 0..2_000 {
            let len = rng.random_range(0..64);
            let junk: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let m = RaftMsg {
                group: 0,
                raft: RaftBytes(junk),
            };
            refused += m.decode().is_err() as u32;
        }
        assert!(refused > 0, "random bytes were all accepted");
    }
}
