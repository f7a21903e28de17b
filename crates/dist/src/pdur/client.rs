//! Client execution (Algorithm 3): reads at a snapshot kept per partition in the snapshot vector,
//! read-your-writes from the buffered write set, and termination — local for read-only
//! transactions, a [`CertRequest`] to broadcast for update transactions.

use smallvec::SmallVec;

use super::partition::{ReadError, ReadReply};
use super::request::{CertRequest, PartitionId, ReadItem, Sc, TxnId, partition_of};
use crate::ramp::msg::{Key, Value};

/// Where a transaction reads: the partitions of one replica (in this process, or behind a
/// connection to it).
pub trait SnapshotSource {
    /// The number of partitions.
    fn partitions(&self) -> usize;
    /// Reads `key` at partition `p` at snapshot `st`, or at the partition's stable snapshot
    /// (which it keeps in use) if `st` is `None` (Algorithm 4 lines 3–6).
    fn read(&mut self, p: PartitionId, key: Key, st: Option<Sc>) -> Result<ReadReply, ReadError>;
    /// Takes partition `p`'s stable snapshot, kept in use, for a partition written but not read.
    fn take_snapshot(&mut self, p: PartitionId) -> Sc;
    /// The transaction is done with snapshot `st` of partition `p`.
    fn release(&mut self, p: PartitionId, st: Sc);
    /// Whether `keys` of partition `p` still have no version above `st` from a transaction that
    /// voted commit there.
    fn reads_current(&mut self, p: PartitionId, keys: &[Key], st: Sc) -> bool;
}

/// How a transaction ended at the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Finish {
    /// Read-only: committed or aborted without broadcast, with what it read.
    ReadOnly {
        /// True if it committed.
        committed: bool,
        /// Its read set with the versions read.
        reads: Vec<ReadItem>,
    },
    /// An update transaction: broadcast this request to its partitions and wait for the outcome.
    Update(CertRequest),
}

/// One transaction being executed (Algorithm 3's `t`).
#[derive(Debug)]
pub struct Transaction {
    id: TxnId,
    partitions: usize,
    /// `t.st[1..P]`, only the partitions with a snapshot, ascending.
    snapshots: SmallVec<[(PartitionId, Sc); 4]>,
    reads: Vec<(ReadItem, Option<Value>)>,
    writes: Vec<(Key, Value)>,
}

impl Transaction {
    /// `begin(t)` (Algorithm 3 lines 1–4) in a replica of `partitions` partitions.
    pub fn begin(id: TxnId, partitions: usize) -> Transaction {
        Transaction {
            id,
            partitions,
            snapshots: SmallVec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
        }
    }

    /// The transaction's id.
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// Its snapshot at `p`, if it has one.
    pub fn snapshot(&self, p: PartitionId) -> Option<Sc> {
        self.snapshots.iter().find(|s| s.0 == p).map(|s| s.1)
    }

    /// The reads so far, with the versions and values read.
    pub fn reads(&self) -> &[(ReadItem, Option<Value>)] {
        &self.reads
    }

    /// `read(t, k)` (Algorithm 3 lines 5–14): the buffered write if `t` wrote `k`, else the value
    /// of `k` in `t`'s snapshot of its partition, taking that snapshot on the first read there.
    pub fn read(
        &mut self,
        key: Key,
        src: &mut impl SnapshotSource,
    ) -> Result<Option<Value>, ReadError> {
        if let Some(w) = self.writes.iter().find(|w| w.0 == key) {
            return Ok(Some(w.1.clone()));
        }
        if let Some(r) = self.reads.iter().find(|r| r.0.key == key) {
            return Ok(r.1.clone());
        }
        let p = partition_of(key, self.partitions);
        let st = self.snapshot(p);
        let reply = src.read(p, key, st)?;
        if st.is_none() {
            self.set_snapshot(p, reply.snapshot);
        }
        self.reads.push((
            ReadItem {
                key,
                version: reply.version,
            },
            reply.value.clone(),
        ));
        Ok(reply.value)
    }

    /// Records a read that was served elsewhere (a batched read of another thread): `reply` is
    /// the answer for `key` from partition `p`.
    pub fn record_read(&mut self, p: PartitionId, key: Key, reply: ReadReply) {
        if self.snapshot(p).is_none() {
            self.set_snapshot(p, reply.snapshot);
        }
        self.reads.push((
            ReadItem {
                key,
                version: reply.version,
            },
            reply.value,
        ));
    }

    /// True if `key` was read or written already (a read of it needs no partition).
    pub fn knows(&self, key: Key) -> bool {
        self.writes.iter().any(|w| w.0 == key) || self.reads.iter().any(|r| r.0.key == key)
    }

    /// The value read or written for `key` so far.
    pub fn value_of(&self, key: Key) -> Option<&Value> {
        if let Some(w) = self.writes.iter().find(|w| w.0 == key) {
            return Some(&w.1);
        }
        self.reads
            .iter()
            .find(|r| r.0.key == key)
            .and_then(|r| r.1.as_ref())
    }

    /// `write(t, k, v)` (Algorithm 3 lines 15–16): buffers the write.
    pub fn write(&mut self, key: Key, value: Value) {
        match self.writes.iter_mut().find(|w| w.0 == key) {
            Some(w) => w.1 = value,
            None => self.writes.push((key, value)),
        }
    }

    /// The buffered writes.
    pub fn writes(&self) -> &[(Key, Value)] {
        &self.writes
    }

    /// True while the transaction wrote nothing.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
    }

    fn set_snapshot(&mut self, p: PartitionId, st: Sc) {
        let at = self.snapshots.partition_point(|s| s.0 < p);
        self.snapshots.insert(at, (p, st));
    }

    /// `commit(t)` (Algorithm 3 lines 17–20). A read-only transaction commits here: on one
    /// partition its snapshot is consistent; across partitions each snapshot was taken at its
    /// own moment, and a cross-partition transaction visible in one but not another would make
    /// a fractured read, so the reads are checked still current at every partition read
    /// ([`SnapshotSource::reads_current`]; then they are serialisable at the moment of the
    /// check, after every read). An update transaction takes a snapshot of every partition it
    /// writes without reading (the stronger certification test needs `st[p]` there) and becomes
    /// the request to broadcast. Either way the snapshots are released: certification needs
    /// no old versions.
    pub fn finish(self, src: &mut impl SnapshotSource) -> Finish {
        if self.writes.is_empty() {
            let mut ok = true;
            for (p, keys, st) in self.read_only_checks() {
                ok = ok && src.reads_current(p, &keys, st);
            }
            return self.finish_read_only(ok, src);
        }
        self.finish_update(src)
    }

    /// The checks a read-only transaction needs before it commits: per partition read, the keys
    /// and the snapshot; none when it read one partition (whose snapshot is consistent).
    pub fn read_only_checks(&self) -> Vec<(PartitionId, Vec<Key>, Sc)> {
        if self.snapshots.len() < 2 {
            return Vec::new();
        }
        self.snapshots
            .iter()
            .map(|&(p, st)| {
                let keys = self
                    .reads
                    .iter()
                    .map(|r| r.0.key)
                    .filter(|&k| partition_of(k, self.partitions) == p)
                    .collect();
                (p, keys, st)
            })
            .collect()
    }

    /// Ends a read-only transaction whose [`Transaction::read_only_checks`] came out `ok`.
    pub fn finish_read_only(self, ok: bool, src: &mut impl SnapshotSource) -> Finish {
        debug_assert!(self.writes.is_empty());
        self.release(src);
        Finish::ReadOnly {
            committed: ok,
            reads: self.reads.into_iter().map(|r| r.0).collect(),
        }
    }

    /// Ends an update transaction: the request to broadcast (see [`Transaction::finish`]).
    pub fn finish_update(self, src: &mut impl SnapshotSource) -> Finish {
        let mut snapshots = self.snapshots.clone();
        for &(key, _) in &self.writes {
            let p = partition_of(key, self.partitions);
            if let Err(at) = snapshots.binary_search_by_key(&p, |s| s.0) {
                snapshots.insert(at, (p, src.take_snapshot(p)));
            }
        }
        for &(p, st) in &snapshots {
            src.release(p, st);
        }
        Finish::Update(CertRequest {
            id: self.id,
            snapshots: snapshots.into_vec(),
            reads: self.reads.into_iter().map(|r| r.0).collect(),
            writes: self.writes,
        })
    }

    /// Gives the transaction up (a failed read, a user abort): releases its snapshots.
    pub fn abort(self, src: &mut impl SnapshotSource) {
        self.release(src);
    }

    fn release(&self, src: &mut impl SnapshotSource) {
        for &(p, st) in &self.snapshots {
            src.release(p, st);
        }
    }
}
