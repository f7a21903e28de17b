//! STAR's messages: phase switching and the replication fence (§4.3, Figure 4), the replication
//! stream (§5), client requests and replies, and queries for statistics, digests and histories.
//!
//! Messages carry a workload's request as bytes (its postcard encoding), so they do not depend on
//! the workload and a node can answer a request it cannot decode with an error. Decoding a whole
//! message is the wire layer's job (frames are bounded at 16 MiB and checked); the node bounds
//! what it accepts inside one ([`MAX_REQUEST_BYTES`]) and what it sends ([`MAX_ERROR_BYTES`],
//! replication batches of about [`crate::star::replicate::FLUSH_BYTES`]).

use serde::{Deserialize, Serialize};

use crate::star::layout::Layout;
use crate::star::stats::StarStats;
use phasedb_check::History;
use phasedb_net::Addr;
use phasedb_txn::PartitionId;

/// A phase number: 1, 2, 3… Odd phases are partitioned, even ones single-master (the system
/// starts in the partitioned phase and the two alternate, §4.3). Every node sets its engine's
/// epoch to the phase number, so TIDs of a later phase are above those of every earlier one. The
/// TID holds 28 bits of epoch, so a cluster runs at most 2^28 - 1 phases (about 15 days of 10 ms
/// iterations); the engine refuses a later epoch with a panic.
pub type Phase = u64;

/// The two phases of STAR (§4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PhaseKind {
    /// Each partition's primary runs its single-partition transactions (§4.1).
    Partitioned,
    /// The coordinator runs the cross-partition transactions (§4.2).
    SingleMaster,
}

impl PhaseKind {
    /// The kind of phase `phase`.
    pub fn of(phase: Phase) -> PhaseKind {
        if phase % 2 == 1 {
            PhaseKind::Partitioned
        } else {
            PhaseKind::SingleMaster
        }
    }
}

/// Longest request body a node accepts.
pub const MAX_REQUEST_BYTES: usize = 64 << 10;
/// Longest error text a node sends.
pub const MAX_ERROR_BYTES: usize = 256;

/// What became of a client's request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Committed in `phase`; sent once that phase's replication fence completed.
    Committed {
        /// The phase it committed in.
        phase: Phase,
    },
    /// The procedure aborted itself in `phase` (nothing written); sent once the phase ended.
    Aborted {
        /// The phase it ran in.
        phase: Phase,
    },
    /// Not run, or failed: a request that does not decode, names an unknown partition, reached a
    /// node that can neither run nor route it, or failed in the engine. Nothing was written.
    Error(String),
}

impl Outcome {
    /// An error outcome with `text` cut to [`MAX_ERROR_BYTES`].
    pub fn error(text: impl Into<String>) -> Outcome {
        let mut text = text.into();
        if text.len() > MAX_ERROR_BYTES {
            let mut cut = MAX_ERROR_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        Outcome::Error(text)
    }
}

/// What a node reports to the coordinator at the end fence of a phase; the coordinator splits the
/// next iteration with it (see [`crate::star::phase`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Transactions the node ran in the phase (committed or aborted by their procedure).
    pub ran: u64,
    /// Of those, requests the node generated itself (the benchmark's load).
    pub generated: u64,
    /// Single-partition requests from clients that arrived at this node in the phase.
    pub arrived_single: u64,
    /// Single-partition requests waiting at this node for a partitioned phase.
    pub queued_single: u64,
}

/// A partition's digest on one node (see [`phasedb_txn::Database::digest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionDigest {
    /// The partition.
    pub partition: PartitionId,
    /// Its rows' digest over every table.
    pub digest: u64,
}

/// What a [`StarMsg::Query`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Query {
    /// The node's counters.
    Stats,
    /// A digest of each partition the node holds; meaningful between phases once load stopped.
    Digests,
    /// The committed transactions recorded since the last such query (when the node records).
    History,
    /// Starts (true) or stops (false) the node's own load, as a benchmark does around its run;
    /// answered with the node's counters at that moment ([`Answer::Stats`]).
    Load(bool),
    /// The workload's consistency check (`Procedures::check`) on the partitions the node holds;
    /// meaningful between phases once load stopped.
    Check,
    /// The rows of table `table` with keys `first..first + count` that the node holds, as they
    /// are now (at most [`MAX_ROWS_PER_QUERY`]; a larger `count` is cut): what a test reads back
    /// from every replica after a failure. Meaningful between phases once load stopped.
    Rows {
        /// The table.
        table: u32,
        /// The first key.
        first: u64,
        /// How many keys from `first` on.
        count: u32,
    },
}

/// Most keys one [`Query::Rows`] covers (an answer of at most a few MiB for rows of a few hundred
/// bytes).
pub const MAX_ROWS_PER_QUERY: u32 = 4096;

/// One row of an [`Answer::Rows`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowImage {
    /// Its key.
    pub key: u64,
    /// Each column's stored bytes, in the schema's order.
    pub columns: Vec<Vec<u8>>,
}

/// The answer to a [`StarMsg::Query`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    /// Counters.
    Stats(Box<StarStats>),
    /// Digests of the partitions held.
    Digests(Vec<PartitionDigest>),
    /// Recorded committed transactions (empty unless the node records histories).
    History(History),
    /// The consistency check's verdict: the first violation found, if any.
    Check(Result<(), String>),
    /// The rows asked for that exist on the node, in key order.
    Rows(Vec<RowImage>),
}

/// Every message of a STAR cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StarMsg {
    /// Coordinator to every node: `phase` begins, planned to last `length_ns` (§4.3). It also says
    /// the phase before it ended everywhere, so results committed in it may be released. The
    /// baselines' primary sends it when group commit `phase - 1` completed (its writes are on
    /// every replica), with `length_ns` 0.
    Begin {
        /// The new phase.
        phase: Phase,
        /// Its planned length.
        length_ns: u64,
    },
    /// Coordinator to every node: stop executing `phase` and start its replication fence (Figure 4).
    StartFence {
        /// The phase ending.
        phase: Phase,
    },
    /// Node to every other node during the fence of `phase`: "my replication batches to you are
    /// numbered up to `through`" — the receiver waits until it has applied all of them.
    Sent {
        /// The phase being fenced.
        phase: Phase,
        /// The number of the last batch the sender sent to the receiver (0: none ever).
        through: u64,
    },
    /// Node to coordinator: every replication batch sent to this node has been applied (Figure 4).
    EndFence {
        /// The phase fenced.
        phase: Phase,
        /// The failures the node knew of when it ended the fence (see `failover`): the
        /// coordinator counts only end fences sent after every failure it announced.
        view: u64,
        /// What the node did in it.
        report: PhaseReport,
    },
    /// A batch of replication records (§5.2), in the format of `phasedb_txn::star`: numbered per
    /// sender and receiver from 1, and applied by the receiver in that order.
    Replicate {
        /// The phase the records' transactions committed in.
        phase: Phase,
        /// The batch's number in the stream from its sender to its receiver.
        seq: u64,
        /// The records (`serde_bytes`: copied whole, not byte by byte; the same postcard encoding).
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// Receiver of replication to its sender (the baselines, [`crate::star::baselines`]): every batch of
    /// the sender's stream to it up to number `through` is applied. Synchronous replication
    /// releases a transaction's locks and result once its batch is acknowledged; a group commit
    /// completes once every batch sent before it is.
    Acked {
        /// The number of the last batch applied.
        through: u64,
    },
    /// Client to any node: run the request encoded in `body`.
    Request {
        /// The client's id for the request, echoed in the reply.
        rid: u64,
        /// The workload's request, postcard-encoded.
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
    },
    /// Client to a node holding a copy of every partition the request touches: run this read-only
    /// request at once on the node's own copies, at read committed (STAR §4.3: read-only
    /// transactions may run on secondaries). It is answered without waiting for a phase to end and
    /// is not part of the serializable history; a request that writes, or names a partition the
    /// node holds no copy of, gets an error. The baselines run it as an ordinary [`StarMsg::Request`]
    /// (serializable, hence read committed too).
    ReadCommitted {
        /// The client's id for the request, echoed in the reply.
        rid: u64,
        /// The workload's request, postcard-encoded.
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
    },
    /// Node to node: a client's request that the receiver runs (a partition's primary, or the
    /// coordinator for a cross-partition request); the result goes back to the forwarding node.
    Forward {
        /// The client that sent it to the forwarding node.
        client: Addr,
        /// The client's id for it.
        rid: u64,
        /// The request, as the client encoded it.
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
    },
    /// Node to client: the outcome of request `rid`.
    Reply {
        /// The client's id for the request.
        rid: u64,
        /// What became of it.
        outcome: Outcome,
    },
    /// Node to the node that forwarded a request: its outcome, to relay to `client`.
    Forwarded {
        /// The client to answer.
        client: Addr,
        /// The client's id for the request.
        rid: u64,
        /// What became of it.
        outcome: Outcome,
    },
    /// Anyone to a node: a question about its state.
    Query {
        /// Echoed in the answer.
        rid: u64,
        /// What is asked.
        query: Query,
    },
    /// Node to whoever asked: the answer.
    Answer {
        /// The query's id.
        rid: u64,
        /// The answer.
        answer: Answer,
    },
    /// Dist-OCC/Dist-S2PL, home to a partition's primary: the rows `keys` (table, key) and every
    /// row in the key ranges `scans` (table, low, high) for the home's transaction `txn` — remote
    /// reads and scans, locking the rows first under S2PL (`lock`).
    Fetch {
        /// The home's id for the transaction.
        txn: u64,
        /// Lock the rows (NO_WAIT) and hold them until the decision.
        lock: bool,
        /// The rows.
        keys: Vec<(u32, u64)>,
        /// The key ranges scanned (tables with an ordered index).
        scans: Vec<(u32, u64, u64)>,
    },
    /// Primary to home: the rows fetched, as replication records with their TIDs; `ok` false if
    /// one was locked (NO_WAIT: the transaction aborts).
    Rows {
        /// The home's id for the transaction.
        txn: u64,
        /// Every row was read (and locked, if asked).
        ok: bool,
        /// The rows.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// Home to participant, two-phase commit's prepare (Dist-OCC, and Dist-S2PL for a
    /// transaction that scanned there): lock `writes` (NO_WAIT), validate `reads` (table, key,
    /// column group, TID word read) and check that each range of `scans` holds no row the
    /// transaction did not read (no phantom); answered with a vote.
    Prepare {
        /// The home's id for the transaction.
        txn: u64,
        /// Rows written.
        writes: Vec<(u32, u64)>,
        /// Column groups read, with the words observed.
        reads: Vec<(u32, u64, u8, u64)>,
        /// The key ranges scanned there (table, low, high).
        scans: Vec<(u32, u64, u64)>,
    },
    /// Home to participant: validate the prepare's reads again, now that every participant holds
    /// its locks; answered with a vote.
    Validate {
        /// The home's id for the transaction.
        txn: u64,
    },
    /// Participant to home: its vote on `txn`.
    Vote {
        /// The home's id for the transaction.
        txn: u64,
        /// Locked and valid.
        yes: bool,
        /// The highest TID of the rows the participant locked for it: the home commits above it,
        /// so that replicas ordering versions by TID agree with the primary.
        floor: u64,
    },
    /// Home to participant: the decision. A commit installs `bytes` (the transaction's writes of
    /// the participant's rows, as replication records with its TID) and releases the locks, or
    /// keeps them until [`StarMsg::Release`] when `hold` (synchronous replication).
    Decide {
        /// The home's id for the transaction.
        txn: u64,
        /// Commit (else abort: release everything).
        commit: bool,
        /// Keep the locks until released.
        hold: bool,
        /// The writes.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// Home to participant: the transaction's writes are on every replica; release its locks.
    Release {
        /// The home's id for the transaction.
        txn: u64,
    },
    /// Calvin (`crate::calvin`): the sequencer's batch number `batch`, to every node of every
    /// replica group; `bytes` is the postcard encoding of the batch's requests in their global order.
    CalvinBatch {
        /// The batch's number, from 1, one every 10 ms.
        batch: u64,
        /// The requests, postcard-encoded as one sequence.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// Calvin: a participant of transaction `index` of `batch` holds its locks and sends the
    /// values of the rows of its partitions the transaction reads (the remote-read round of a
    /// multi-node transaction).
    CalvinReads {
        /// The batch.
        batch: u64,
        /// The transaction's place in it.
        index: u32,
        /// The rows, as replication records with their TIDs (`Database::read_rows`).
        #[serde(with = "serde_bytes")]
        rows: Vec<u8>,
    },
    /// Calvin: node to sequencer, every transaction of `batch` it takes part in has run.
    CalvinDone {
        /// The batch.
        batch: u64,
    },
    /// STAR: "I am alive" (§7.1), sent every `heartbeat_ms`; any message counts as much.
    Heartbeat,
    /// STAR: coordinator to every live node, node `node` failed in phase `phase` (§7.1): what it
    /// replicated in that phase is taken back, its partitions are re-mastered, and the fence
    /// goes on without it. `view` counts the failures announced so far.
    Failed {
        /// The failed node.
        node: u32,
        /// The phase its failure interrupted.
        phase: Phase,
        /// Failures announced so far, this one included.
        view: u64,
    },
    /// STAR: "I am starting" (§7.2), to every other node at start and every heartbeat until a
    /// phase began. A node heard from before under another incarnation, or declared failed, has
    /// restarted (see `recover`).
    Hello {
        /// Differs from one start of the node to the next.
        incarnation: u64,
    },
    /// STAR: coordinator to every live node and to the restarted node `node`: it holds its
    /// partitions again from phase `phase` on, recovering (§7.2).
    Rejoin {
        /// The restarted node.
        node: u32,
        /// The phase from whose begin it is a member again.
        phase: Phase,
        /// Failures announced so far.
        view: u64,
        /// The layout from that phase on (for the restarted node).
        layout: Box<Layout>,
    },
    /// STAR: live node to coordinator, it will take `node` back at the rejoin's phase.
    RejoinAck {
        /// The restarted node.
        node: u32,
    },
    /// STAR: restarted node to a live replica, send me a copy of `partition` (§7.2).
    CopyRequest {
        /// The partition.
        partition: PartitionId,
    },
    /// STAR: live replica to restarted node, rows of `partition` as replication records with
    /// their TIDs; chunks are numbered from 1 and the last says so.
    CopyChunk {
        /// The partition.
        partition: PartitionId,
        /// The chunk's number.
        seq: u64,
        /// Whether it is the last.
        last: bool,
        /// The rows.
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// STAR: restarted node `node` to the coordinator, every partition is copied; then
    /// coordinator to every node, recovery mode for `node` ends at the next phase.
    Recovered {
        /// The restarted node.
        node: u32,
    },
    /// STAR: the fall-back leader to every live node, once no full replica is left (§7.2) and the
    /// interrupted phase's fence ended everywhere: from now on the cluster runs Dist-OCC over the
    /// partial replicas, its first group commit numbered `phase` (see `fallback`).
    FallBack {
        /// The first group of the fall-back (the phase after the interrupted one).
        phase: Phase,
        /// Failures announced so far.
        view: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serde_bytes` changes how a byte buffer is copied, not how it is encoded: postcard writes a
    /// byte string and a sequence of `u8` alike (a varint length, then the bytes).
    #[test]
    fn byte_buffers_encode_as_a_sequence_of_u8_would() {
        let bytes: Vec<u8> = (0..=255).collect();
        let msg = StarMsg::Request {
            rid: 7,
            body: bytes.clone(),
        };
        let encoded = postcard::to_stdvec(&msg).unwrap();
        // A plain `Vec<u8>` goes through serde as a sequence of `u8`.
        let plain = postcard::to_stdvec(&(7u64, &bytes)).unwrap();
        assert_eq!(encoded.len(), 1 + plain.len(), "one byte of variant index");
        assert!(encoded.ends_with(&plain));
        assert_eq!(postcard::from_bytes::<StarMsg>(&encoded).unwrap(), msg);
    }

    /// A history answer decodes as sent over TCP (postcard), with and without Doppel's split
    /// operations: a field left out when empty would leave the decoder reading the next
    /// transaction's bytes as it.
    #[test]
    fn a_history_answer_survives_the_wire() {
        use phasedb_check::{Item, ReadEvent, SplitOpEvent, TxnEvent, WriteEvent, WriteKind};
        let item = Item::new(1, 7);
        let plain = TxnEvent {
            id: 1,
            worker: 0,
            reads: vec![ReadEvent { item, version: 3 }],
            writes: vec![WriteEvent {
                item,
                version: 5,
                prev: 3,
                kind: WriteKind::Update,
            }],
            split_ops: Vec::new(),
            merges: Vec::new(),
        };
        let split = TxnEvent {
            id: 2,
            split_ops: vec![SplitOpEvent { item, phase: 4 }],
            ..plain.clone()
        };
        let msg = StarMsg::Answer {
            rid: 9,
            answer: Answer::History(History {
                txns: vec![plain, split],
            }),
        };
        let encoded = postcard::to_stdvec(&msg).unwrap();
        assert_eq!(postcard::from_bytes::<StarMsg>(&encoded).unwrap(), msg);
    }
}
