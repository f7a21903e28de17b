//! The certification request a client atomically broadcasts to the partitions its update
//! transaction touched (Algorithm 3 line 18), and the bytes a delivered payload is.
//!
//! A request is the paper's transaction tuple ⟨id, st, rs, ws⟩ with the snapshot *vector*
//! (Algorithm 3 line 4) restricted to `partitions(t)`: one entry per partition the transaction read
//! or wrote, which is also the set of partitions it is broadcast to and that exchange votes.

use serde::{Deserialize, Serialize};

use crate::ramp::msg::{Key, Value};

/// A logical partition of a replica (§IV-A).
pub type PartitionId = u16;

/// A value of a partition's snapshot counter `SC` (Algorithm 4 line 2): a snapshot, and the
/// version a committed transaction's writes carry there.
pub type Sc = u64;

/// The version of every item loaded before the first transaction, and the first snapshot.
pub const LOAD_VERSION: Sc = 1;

/// The first byte of an encoded [`CertRequest`]: a payload from anything else is refused at once.
pub const PAYLOAD_TAG: u8 = 0xD7;

/// Reads or writes a request may carry; larger ones are refused (the paper's largest type has 34).
pub const MAX_OPS: usize = 4096;

/// The largest value a write may carry.
pub const MAX_VALUE: usize = 64 * 1024;

/// The partition of a key among `partitions` (§IV-A's `partition(k)`): the key modulo their
/// number, so a workload draws a key of partition `p` as `i * partitions + p`.
pub fn partition_of(key: Key, partitions: usize) -> PartitionId {
    (key % partitions as u64) as PartitionId
}

/// A transaction's unique identifier: the client that ran it and its sequence number there. A
/// client runs one transaction at a time and numbers them upwards, so each partition delivers a
/// client's transactions with growing sequence numbers and can recognise a duplicate delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnId {
    /// The client (unique within the cluster).
    pub origin: u32,
    /// The client's sequence number, from 1.
    pub seq: u64,
}

/// The first sequence number of a client of a replica in its `incarnation`-th life (0 for the
/// first): a replica restarted without its state reuses its clients' origins, so it numbers their
/// transactions above anything an earlier life broadcast (2^31 per client and life), or the
/// partitions would ignore them as duplicates.
pub fn first_seq(incarnation: u32) -> u64 {
    u64::from(incarnation) << 31
}

/// One key of the read set and the version the transaction read (`LOAD_VERSION` for a loaded
/// item; 0 for a key that had no version in the snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadItem {
    /// The key read.
    pub key: Key,
    /// The version read.
    pub version: Sc,
}

/// An update transaction to certify: what a client broadcasts and each partition delivers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertRequest {
    /// The transaction.
    pub id: TxnId,
    /// The snapshot vector over `partitions(t)`, ascending by partition: the snapshot the
    /// transaction read each partition at (for a partition it only wrote, the partition's stable
    /// snapshot when the transaction was broadcast; see [`crate::pdur::certify`]).
    pub snapshots: Vec<(PartitionId, Sc)>,
    /// The read set with the versions read (reads served from the write set are not in it).
    pub reads: Vec<ReadItem>,
    /// The write set.
    pub writes: Vec<(Key, Value)>,
}

/// Why a payload is not a certification request this replica can certify. Every replica decodes
/// the same bytes to the same error, so refusing one changes no state anywhere.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Empty, or not starting with [`PAYLOAD_TAG`].
    #[error("not a certification request (bad tag)")]
    BadTag,
    /// The bytes after the tag are not a request, or bytes follow it.
    #[error("undecodable certification request: {0}")]
    Decode(String),
    /// A structural rule is broken (the text says which).
    #[error("invalid certification request: {0}")]
    Invalid(&'static str),
    /// Delivered on a partition the request does not name.
    #[error("request delivered on partition {0}, which it does not touch")]
    WrongPartition(PartitionId),
}

impl CertRequest {
    /// The partitions the transaction touched, ascending.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> + '_ {
        self.snapshots.iter().map(|s| s.0)
    }

    /// True when it touches more than one partition.
    pub fn is_cross_partition(&self) -> bool {
        self.snapshots.len() > 1
    }

    /// Its snapshot at partition `p`, if it touches `p`.
    pub fn snapshot(&self, p: PartitionId) -> Option<Sc> {
        self.snapshots
            .binary_search_by_key(&p, |s| s.0)
            .ok()
            .map(|i| self.snapshots[i].1)
    }

    /// The payload bytes to broadcast: [`PAYLOAD_TAG`], then the request in postcard.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![PAYLOAD_TAG];
        postcard::to_io(self, &mut out).expect("writing to a vector cannot fail");
        out
    }

    /// Decodes a delivered payload and checks it against a replica of `partitions` partitions
    /// ([`CertRequest::validate`]). Never panics on arbitrary bytes.
    pub fn decode(payload: &[u8], partitions: usize) -> Result<CertRequest, RequestError> {
        let Some((&PAYLOAD_TAG, body)) = payload.split_first() else {
            return Err(RequestError::BadTag);
        };
        let (req, rest): (CertRequest, _) =
            postcard::take_from_bytes(body).map_err(|e| RequestError::Decode(e.to_string()))?;
        if !rest.is_empty() {
            return Err(RequestError::Decode(format!(
                "{} bytes after the request",
                rest.len()
            )));
        }
        req.validate(partitions)?;
        Ok(req)
    }

    /// The rules every delivered request must follow: partitions named once, ascending and in
    /// range; at least one write (read-only transactions are never broadcast); no key read or
    /// written twice; every key in a named partition and every named partition touched; no
    /// version read above the snapshot it was read at; sizes within [`MAX_OPS`] and [`MAX_VALUE`].
    pub fn validate(&self, partitions: usize) -> Result<(), RequestError> {
        use RequestError::Invalid;
        if self.snapshots.is_empty() {
            return Err(Invalid("no partition"));
        }
        if self.snapshots.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Invalid("partitions not strictly ascending"));
        }
        if self.snapshots.iter().any(|s| s.0 as usize >= partitions) {
            return Err(Invalid("partition out of range"));
        }
        if self.writes.is_empty() {
            return Err(Invalid(
                "no write: read-only transactions are not certified",
            ));
        }
        if self.reads.len() > MAX_OPS || self.writes.len() > MAX_OPS {
            return Err(Invalid("too many operations"));
        }
        if self.writes.iter().any(|w| w.1.len() > MAX_VALUE) {
            return Err(Invalid("value too large"));
        }
        let mut touched = vec![false; self.snapshots.len()];
        let mut index_of = |key: Key| {
            let p = partition_of(key, partitions);
            let i = self.snapshots.binary_search_by_key(&p, |s| s.0).ok()?;
            touched[i] = true;
            Some(i)
        };
        for r in &self.reads {
            let i = index_of(r.key).ok_or(Invalid("read outside the named partitions"))?;
            if r.version > self.snapshots[i].1 {
                return Err(Invalid("version read above its snapshot"));
            }
        }
        for w in &self.writes {
            index_of(w.0).ok_or(Invalid("write outside the named partitions"))?;
        }
        if touched.contains(&false) {
            return Err(Invalid("a named partition is not touched"));
        }
        if has_duplicates(self.reads.iter().map(|r| r.key)) {
            return Err(Invalid("a key read twice"));
        }
        if has_duplicates(self.writes.iter().map(|w| w.0)) {
            return Err(Invalid("a key written twice"));
        }
        Ok(())
    }
}

fn has_duplicates(keys: impl Iterator<Item = Key>) -> bool {
    let mut keys: Vec<Key> = keys.collect();
    if keys.len() < 2 {
        return false;
    }
    keys.sort_unstable();
    keys.windows(2).any(|w| w[0] == w[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> CertRequest {
        CertRequest {
            id: TxnId { origin: 3, seq: 9 },
            snapshots: vec![(0, 5), (1, 7)],
            reads: vec![ReadItem { key: 4, version: 5 }],
            writes: vec![(9, vec![1, 2, 3, 4])],
        }
    }

    #[test]
    fn a_request_round_trips_through_its_payload_bytes() {
        let r = request();
        assert_eq!(CertRequest::decode(&r.encode(), 2), Ok(r));
    }

    #[test]
    fn truncated_padded_and_arbitrary_payloads_are_refused_without_panicking() {
        let bytes = request().encode();
        for n in 0..bytes.len() {
            assert!(CertRequest::decode(&bytes[..n], 2).is_err(), "{n} bytes");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(matches!(
            CertRequest::decode(&padded, 2),
            Err(RequestError::Decode(_))
        ));
        let mut x = 7u64;
        for _ in 0..2000 {
            let len = (x % 40) as usize;
            let junk: Vec<u8> = (0..len)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if i == 0 { PAYLOAD_TAG } else { x as u8 }
                })
                .collect();
            let _ = CertRequest::decode(&junk, 2);
        }
    }

    #[test]
    fn structural_rules_are_enforced() {
        type Spoil = Box<dyn Fn(&mut CertRequest)>;
        let cases: Vec<(&str, Spoil)> = vec![
            ("no partition", Box::new(|r| r.snapshots.clear())),
            ("descending", Box::new(|r| r.snapshots.reverse())),
            ("out of range", Box::new(|r| r.snapshots[1].0 = 2)),
            ("read-only", Box::new(|r| r.writes.clear())),
            ("read elsewhere", Box::new(|r| r.reads[0].key = 5)),
            ("untouched partition", Box::new(|r| r.reads.clear())),
            ("future version", Box::new(|r| r.reads[0].version = 6)),
            ("duplicate write", Box::new(|r| r.writes.push((9, vec![0])))),
            (
                "huge value",
                Box::new(|r| r.writes[0].1 = vec![0; MAX_VALUE + 1]),
            ),
        ];
        for (name, spoil) in cases {
            let mut r = request();
            spoil(&mut r);
            assert!(
                matches!(r.validate(2), Err(RequestError::Invalid(_))),
                "{name}"
            );
        }
    }
}
