//! The messages of every distributed algorithm, and the types they carry.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::ramp::bloom::Bloom;
pub use crate::ramp::write_set::WriteSet;
use phasedb_net::Addr;

/// An item id; items are hash-partitioned by it.
pub type Key = u64;
/// A transaction timestamp: unique per transaction (client id and sequence number, see [`crate::ramp::ts`]).
pub type Ts = u64;
/// An item's value; `None` in a result is the initial null value.
pub type Value = Vec<u8>;
/// The servers a write prepares on, kept for cooperative termination: held in place for up to
/// four, so a PREPARE and the server's pending entry cost no allocation for them.
pub type Participants = SmallVec<[Addr; 4]>;

/// Metadata a writer attaches to each version so readers can detect fractured reads. Copies cost no
/// allocation: small write sets are held in place, larger ones and Bloom filters are shared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Meta {
    /// RAMP-S and the baselines: the timestamp alone.
    None,
    /// RAMP-F: the transaction's whole write set.
    WriteSet(WriteSet),
    /// RAMP-H: a Bloom filter over the write set.
    Bloom(Bloom),
    /// In a RAMP-F read result only: the write set reduced to what the reader can use, following the
    /// GET's [`ReadSetHint`] — the items of its read set on other servers that the writer wrote, and
    /// under a signature perhaps a few items it does not read there. The reader's second-round
    /// decisions consult metadata only for items it reads, and never need a sibling the same GET
    /// reads (see [`crate::ramp::hint`]), so they come out the same. A result without possible
    /// siblings carries no metadata (RAMP-H's too).
    Siblings(WriteSet),
}

/// What a first-round GET tells the server about the reader's read set on the other servers, so
/// that results carry [`Meta::Siblings`] instead of the full write set or filter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadSetHint {
    /// Nothing: full metadata.
    None,
    /// Short RAMP-F and RAMP-H read sets: a 64-bit signature of the items on other servers
    /// ([`crate::ramp::hint::ReadSig`]). A version whose sibling signature shares no bit with it
    /// is answered without metadata; otherwise a write set is trimmed to the items the signature
    /// may contain and a Bloom filter is answered whole. On the wire as 8 raw bytes: its bits are
    /// spread over the word, so a varint would take 10.
    Sig(#[serde(with = "fixed_u64")] u64),
    /// Long RAMP-F read sets: the items on other servers; write sets are trimmed to them.
    Others(WriteSet),
}

/// A `u64` whose bits are all significant (a signature, a hash) as 8 little-endian bytes on the wire.
mod fixed_u64 {
    use std::fmt;

    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&v.to_le_bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        struct Eight;
        impl Visitor<'_> for Eight {
            type Value = u64;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("8 bytes")
            }

            fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<u64, E> {
                let b: [u8; 8] = b
                    .try_into()
                    .map_err(|_| E::invalid_length(b.len(), &self))?;
                Ok(u64::from_le_bytes(b))
            }
        }
        d.deserialize_bytes(Eight)
    }
}

/// [`Participants`] on the wire: a sequence, as a `Vec` is, read without trusting its declared
/// length (smallvec's own decoder reserves room for whatever length the bytes claim).
mod participants_seq {
    use std::fmt;

    use serde::de::{SeqAccess, Visitor};
    use serde::{Deserializer, Serialize, Serializer};

    use super::Participants;

    pub fn serialize<S: Serializer>(p: &Participants, s: S) -> Result<S::Ok, S::Error> {
        p.as_slice().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Participants, D::Error> {
        struct Seq;
        impl<'de> Visitor<'de> for Seq {
            type Value = Participants;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence of node addresses")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Participants, A::Error> {
                let mut out = Participants::new();
                while let Some(a) = seq.next_element()? {
                    out.push(a);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Seq)
    }
}

/// Which version of an item a GET asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GetMode {
    /// The version at lastCommit, with value and metadata (RAMP-F/H first round, NWNR, LWNR).
    Latest,
    /// Only lastCommit's timestamp (RAMP-S first round).
    LatestTs,
    /// The version with exactly this timestamp (RAMP-F second round).
    Exact(Ts),
    /// The highest-timestamped version whose timestamp is in the request's `ts_set` (RAMP-S and
    /// RAMP-H second rounds: every item is matched against the same set, so it travels once per
    /// server).
    InRequestSet,
    /// E-PCI: the newest version whose commit time is at most this read timestamp.
    AtTime(u64),
}

/// One item's answer to a GET.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadResult {
    /// A version (ts 0 with an empty value is the initial null).
    Found {
        /// The item.
        key: Key,
        /// The version's timestamp.
        ts: Ts,
        /// E-PCI commit time (0 for the others).
        ctime: u64,
        /// The value (empty for [`GetMode::LatestTs`]).
        value: Value,
        /// The writer's metadata.
        meta: Meta,
    },
    /// No version matches (a Bloom false positive in RAMP-H).
    Missing {
        /// The item.
        key: Key,
    },
    /// The requested version may have been garbage-collected: the reader must restart.
    Gone {
        /// The item.
        key: Key,
    },
}

impl ReadResult {
    /// The item this result is about.
    pub fn key(&self) -> Key {
        match self {
            ReadResult::Found { key, .. }
            | ReadResult::Missing { key }
            | ReadResult::Gone { key } => *key,
        }
    }
}

/// A lock mode of the lock-based baselines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Shared, held until the transaction ends (LWLR).
    Read,
    /// Shared, released as soon as the item is read (LWSR).
    ShortRead,
    /// Exclusive, held until the transaction's writes are installed.
    Write,
}

/// What a participant knows about a transaction (cooperative termination).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnStatus {
    /// Prepared here, no decision yet.
    Prepared,
    /// Committed here.
    Committed,
    /// Aborted here, or never prepared and now promised never to be.
    Aborted,
}

/// The algorithms a client can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Algorithm {
    /// RAMP-Fast: write-set metadata, one read round without races.
    RampFast,
    /// RAMP-Small: timestamp-only metadata, always two read rounds.
    RampSmall,
    /// RAMP-Hybrid: Bloom-filter metadata.
    RampHybrid,
    /// No concurrency control: one round for reads and writes.
    Nwnr,
    /// Long write locks, no read locks (Read Uncommitted).
    Lwnr,
    /// Long write locks, short read locks (Read Committed).
    Lwsr,
    /// Long write locks, long read locks (Repeatable Read; gives RA).
    Lwlr,
    /// Eiger-style 2PC with coordinator commit checks.
    Epci,
}

impl Algorithm {
    /// Every algorithm, in report order.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::RampFast,
        Algorithm::RampSmall,
        Algorithm::RampHybrid,
        Algorithm::Nwnr,
        Algorithm::Lwnr,
        Algorithm::Lwsr,
        Algorithm::Lwlr,
        Algorithm::Epci,
    ];

    /// The short name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::RampFast => "ramp-f",
            Algorithm::RampSmall => "ramp-s",
            Algorithm::RampHybrid => "ramp-h",
            Algorithm::Nwnr => "nwnr",
            Algorithm::Lwnr => "lwnr",
            Algorithm::Lwsr => "lwsr",
            Algorithm::Lwlr => "lwlr",
            Algorithm::Epci => "e-pci",
        }
    }

    /// Parses a name from [`Algorithm::name`].
    pub fn parse(s: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == s)
    }

    /// True for RAMP-F/S/H.
    pub fn is_ramp(self) -> bool {
        matches!(
            self,
            Algorithm::RampFast | Algorithm::RampSmall | Algorithm::RampHybrid
        )
    }

    /// True for the lock-based baselines (LWNR, LWSR, LWLR).
    pub fn takes_locks(self) -> bool {
        matches!(self, Algorithm::Lwnr | Algorithm::Lwsr | Algorithm::Lwlr)
    }

    /// True for the algorithms that guarantee Read Atomic isolation.
    pub fn is_read_atomic(self) -> bool {
        self.is_ramp() || matches!(self, Algorithm::Lwlr | Algorithm::Epci)
    }
}

/// A transaction: items to read (pre-declared) and writes to install after the reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnSpec {
    /// Items read first, as one GET_ALL.
    pub reads: Vec<Key>,
    /// Writes installed after the reads, as one PUT_ALL.
    pub writes: Vec<(Key, Value)>,
}

/// One item as a transaction read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadValue {
    /// The item.
    pub key: Key,
    /// The version's timestamp (0: the initial null).
    pub ts: Ts,
    /// E-PCI commit time of the version (0 for the others).
    pub ctime: u64,
    /// The value.
    pub value: Value,
}

/// A finished transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// False when a participant refused the PREPARE (CTP had aborted the timestamp): nothing became visible.
    pub committed: bool,
    /// The write timestamp, when the transaction wrote.
    pub ts: Option<Ts>,
    /// E-PCI commit time of the writes (0 for the others).
    pub ctime: u64,
    /// What was read, in the order of [`TxnSpec::reads`].
    pub reads: Vec<ReadValue>,
    /// Rounds of GET the reads took (the last attempt).
    pub read_rounds: u8,
    /// Read attempts restarted because a version was garbage-collected.
    pub restarts: u32,
}

/// Every message of the cluster protocols. `rid` routes a reply to the client that asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// Place a transaction's writes on a partition, not yet visible (RAMP, E-PCI).
    Prepare {
        /// Request id.
        rid: u64,
        /// The transaction's timestamp.
        ts: Ts,
        /// This partition's writes.
        writes: Vec<(Key, Value)>,
        /// Metadata stored with each version.
        meta: Meta,
        /// The [`crate::ramp::hint::ReadSig`] of the transaction's items on the other servers (0
        /// without metadata): a first-round read whose read set elsewhere shares no bit with it
        /// needs none of the metadata, which the server then answers without reading it.
        #[serde(with = "fixed_u64")]
        sibling_sig: u64,
        /// Every server holding a write of the transaction (for CTP).
        #[serde(with = "participants_seq")]
        participants: Participants,
        /// E-PCI's coordinator (None for RAMP).
        coordinator: Option<Addr>,
    },
    /// PREPARE's answer; `ok` is false when the timestamp was already aborted by CTP.
    PrepareAck {
        /// Request id.
        rid: u64,
        /// Whether the versions are in place.
        ok: bool,
        /// E-PCI: the server's logical clock at PREPARE; the commit time must exceed it.
        clock: u64,
        /// The highest timestamp written here ([`crate::ramp::server::store::Store::newest`]).
        newest: Ts,
    },
    /// Make a prepared transaction visible.
    Commit {
        /// Request id.
        rid: u64,
        /// The transaction.
        ts: Ts,
        /// E-PCI: the highest PREPARE clock; the coordinator commits after it (0 for RAMP).
        after: u64,
    },
    /// COMMIT's answer, with the commit time under E-PCI.
    CommitAck {
        /// Request id.
        rid: u64,
        /// E-PCI commit time (0 for RAMP).
        ctime: u64,
    },
    /// Read some items of one partition.
    Get {
        /// Request id.
        rid: u64,
        /// Items and which version of each.
        reads: Vec<(Key, GetMode)>,
        /// The timestamps [`GetMode::InRequestSet`] items are matched against (empty otherwise).
        ts_set: Vec<Ts>,
        /// RAMP-F/H first rounds: the reader's read set on other servers, so results carry
        /// [`Meta::Siblings`].
        hint: ReadSetHint,
    },
    /// GET's answer, one result per item in request order.
    GetReply {
        /// Request id.
        rid: u64,
        /// The results.
        results: Vec<ReadResult>,
        /// E-PCI: the server's logical clock, to advance the client's.
        clock: u64,
    },
    /// Install committed writes in one round (NWNR; lock baselines, which also release `unlock`).
    Put {
        /// Request id.
        rid: u64,
        /// The transaction.
        ts: Ts,
        /// This partition's writes.
        writes: Vec<(Key, Value)>,
        /// Items whose locks held by `owner` are released after installing.
        unlock: Vec<Key>,
        /// The lock owner (the transaction's lock id; `ts` is chosen after the locks are held).
        owner: Ts,
    },
    /// PUT's answer.
    PutAck {
        /// Request id.
        rid: u64,
        /// The highest timestamp written here ([`crate::ramp::server::store::Store::newest`]).
        newest: Ts,
    },
    /// Acquire a lock (lock baselines); answered by [`Msg::LockGranted`] once granted.
    Lock {
        /// Request id.
        rid: u64,
        /// The item.
        key: Key,
        /// Mode.
        mode: LockMode,
        /// The transaction.
        owner: Ts,
    },
    /// A granted lock, with the item's committed version.
    LockGranted {
        /// Request id.
        rid: u64,
        /// The item's version when the lock was granted.
        result: ReadResult,
    },
    /// Release locks without writing; answered by [`Msg::UnlockAck`].
    Unlock {
        /// Request id.
        rid: u64,
        /// The items.
        keys: Vec<Key>,
        /// The transaction.
        owner: Ts,
    },
    /// The owner is alive and still wants these locks: their lease starts again (no answer; a
    /// client waiting past its resend timeout sends it each time it resends).
    Renew {
        /// The items.
        keys: Vec<Key>,
        /// The transaction.
        owner: Ts,
    },
    /// UNLOCK's answer: the locks are released.
    UnlockAck {
        /// Request id.
        rid: u64,
    },
    /// CTP: what do you know of `ts`? (server to server)
    Status {
        /// The transaction.
        ts: Ts,
    },
    /// CTP answer.
    StatusReply {
        /// The transaction.
        ts: Ts,
        /// What the sender knows.
        status: TxnStatus,
        /// The commit time when committed under E-PCI.
        ctime: u64,
    },
    /// E-PCI coordinator to cohort: the transaction committed at `ctime`.
    CommitAt {
        /// The transaction.
        ts: Ts,
        /// Its commit time.
        ctime: u64,
    },
    /// E-PCI commit check: has `ts` committed at or before `read_ts`?
    CheckCommit {
        /// The transaction.
        ts: Ts,
        /// The reader's timestamp; the coordinator will commit only after it if it has not yet.
        read_ts: u64,
    },
    /// E-PCI commit check answer: the commit time, or None while undecided.
    CheckReply {
        /// The transaction.
        ts: Ts,
        /// Its commit time, if committed.
        ctime: Option<u64>,
        /// The read timestamp the answer covers (the coordinator promised to commit after it).
        read_ts: u64,
    },
    /// Ask a server to run a whole transaction on the client's behalf.
    Run {
        /// Request id.
        rid: u64,
        /// The algorithm.
        algorithm: Algorithm,
        /// The transaction.
        txn: TxnSpec,
    },
    /// The proxied transaction's result.
    RunReply {
        /// Request id.
        rid: u64,
        /// Its outcome, or why it could not run.
        outcome: Result<Outcome, String>,
    },
}

impl Msg {
    /// The request id of a reply to a client, if this is one.
    pub fn reply_rid(&self) -> Option<u64> {
        match self {
            Msg::PrepareAck { rid, .. }
            | Msg::CommitAck { rid, .. }
            | Msg::GetReply { rid, .. }
            | Msg::PutAck { rid, .. }
            | Msg::LockGranted { rid, .. }
            | Msg::UnlockAck { rid }
            | Msg::RunReply { rid, .. } => Some(*rid),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasedb_net::wire::{HEADER, decode_batch, encode_frame};
    use serde::de::DeserializeOwned;

    /// `m` after one trip through a wire frame.
    fn round_trip<M: Serialize + DeserializeOwned>(m: &M) -> M {
        let frame = encode_frame(std::slice::from_ref(m)).unwrap();
        let mut back: Vec<M> = Vec::new();
        decode_batch(&frame[HEADER..], &mut back).unwrap();
        assert_eq!(back.len(), 1);
        back.pop().unwrap()
    }

    #[test]
    fn write_sets_of_any_size_survive_the_wire() {
        for n in [0u64, 1, 4, 16, 17, 300] {
            let meta = Meta::WriteSet((0..n).map(|k| k * 1_000_003).collect());
            assert_eq!(round_trip(&meta), meta, "{n} keys");
        }
    }

    #[test]
    fn a_signature_travels_as_eight_bytes_and_a_short_one_is_refused() {
        for sig in [0u64, 1, u64::MAX, 0x8000_0000_0000_0001] {
            let hint = ReadSetHint::Sig(sig);
            assert_eq!(round_trip(&hint), hint);
        }
        let fixed = postcard::to_allocvec(&ReadSetHint::Sig(u64::MAX)).unwrap();
        // Variant tag, length 8, then the word.
        assert_eq!(fixed.len(), 10);
        let short = [1u8, 7, 0, 0, 0, 0, 0, 0, 0];
        assert!(postcard::from_bytes::<ReadSetHint>(&short).is_err());
    }

    #[test]
    fn a_prepare_keeps_its_sibling_signature_and_any_number_of_participants() {
        for n in [1u32, 4, 5, 40] {
            let prepare = Msg::Prepare {
                rid: 7,
                ts: 1 << 40,
                writes: vec![(3, vec![1]), (9, Vec::new())],
                meta: Meta::Bloom(Bloom::of([3, 9, 12], 256, 4)),
                sibling_sig: 0x8000_0000_0000_0001 * n as u64,
                participants: (0..n).map(|a| a * 1000).collect(),
                coordinator: None,
            };
            assert_eq!(round_trip(&prepare), prepare, "{n} participants");
        }
    }

    #[test]
    fn participants_claiming_a_huge_length_are_refused() {
        #[derive(Debug, Deserialize)]
        struct Wrapped(#[serde(with = "participants_seq")] Participants);
        // A declared length of 2^30 addresses (a 4 GiB reservation, were it trusted), then two.
        let bytes = [0x80, 0x80, 0x80, 0x80, 0x04, 1, 2];
        assert!(postcard::from_bytes::<Wrapped>(&bytes).is_err());
        let two = [2, 1, 2];
        assert_eq!(
            &postcard::from_bytes::<Wrapped>(&two).unwrap().0[..],
            [1, 2]
        );
    }
}
