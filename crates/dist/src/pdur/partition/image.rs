//! A partition's state as a state transfer carries it: the bytes a replica offers its
//! partition's broadcast group as the group's snapshot, and the partition a replica that fell
//! behind (or restarted empty) rebuilds from them ([`crate::broadcast::Delivery::Restore`]).
//!
//! The image holds what certification and termination depend on — `SC`, the store's committed
//! versions a snapshot from the stable one on can read, prepared versions, the certification
//! marks, the transactions waiting for votes with the votes that came early, each client's last
//! sequence number — and the recent cross-partition outcomes a restored partition's neighbours
//! need ([`super::VoteKind`]). Snapshots in use and counters are the replica's own and are not
//! carried: a restored partition has no reader yet.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::{Partition, Waiting};
use crate::pdur::certify::AbortReason;
use crate::pdur::request::{PartitionId, Sc, TxnId, partition_of};
use crate::ramp::msg::Key;
use crate::ramp::server::store::{ItemImage, Store};

/// The first byte of an image (the format's version).
const IMAGE_TAG: u8 = 2;

#[derive(Serialize, Deserialize)]
struct WaitingImage {
    txn: TxnId,
    version: Option<Sc>,
    writes: Vec<Key>,
    others: Vec<PartitionId>,
    missing: Vec<PartitionId>,
    commit: bool,
    reason: Option<u8>,
    reply: bool,
}

#[derive(Serialize, Deserialize)]
struct PartitionImage {
    id: PartitionId,
    partitions: u32,
    strong: bool,
    sc: Sc,
    deliveries: u64,
    waiting: Vec<WaitingImage>,
    early: Vec<(TxnId, Vec<(PartitionId, bool)>)>,
    last_seq: Vec<(u32, u64, Option<bool>)>,
    outcomes: Vec<(TxnId, Option<Sc>)>,
    items: Vec<ItemImage>,
}

/// Why bytes are not an image of this partition; the partition is left as it was.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The bytes do not decode.
    #[error("partition image does not decode: {0}")]
    Decode(String),
    /// The image is of another partition, or of a replica with another number of partitions.
    #[error("image of partition {got} of {got_of}, expected {want} of {want_of}")]
    Mismatch {
        /// The partition the image is of.
        got: PartitionId,
        /// Its replica's number of partitions.
        got_of: u32,
        /// This partition.
        want: PartitionId,
        /// This replica's number of partitions.
        want_of: u32,
    },
    /// The image breaks a rule of the partition's state.
    #[error("partition image is inconsistent: {0}")]
    Invalid(&'static str),
}

fn reason_code(r: AbortReason) -> u8 {
    match r {
        AbortReason::StaleRead => 0,
        AbortReason::ConcurrentConflict => 1,
        AbortReason::FutureSnapshot => 2,
        AbortReason::OtherPartition => 3,
    }
}

fn reason_of(c: u8) -> Result<AbortReason, ImageError> {
    Ok(match c {
        0 => AbortReason::StaleRead,
        1 => AbortReason::ConcurrentConflict,
        2 => AbortReason::FutureSnapshot,
        3 => AbortReason::OtherPartition,
        _ => return Err(ImageError::Invalid("unknown abort reason")),
    })
}

impl Partition {
    /// The partition's state as bytes ([`Partition::from_image`] rebuilds it).
    pub fn image(&self) -> Vec<u8> {
        let mut items = Vec::with_capacity(self.store.items());
        self.store.for_each_image(self.stable(), |i| items.push(i));
        let mut waiting: Vec<WaitingImage> = self
            .waiting
            .iter()
            .map(|(&txn, w)| WaitingImage {
                txn,
                version: w.version,
                writes: w.writes.to_vec(),
                others: w.others.to_vec(),
                missing: w.missing.to_vec(),
                commit: w.commit,
                reason: w.reason.map(reason_code),
                reply: w.reply,
            })
            .collect();
        waiting.sort_unstable_by_key(|w| w.txn);
        let image = PartitionImage {
            id: self.id,
            partitions: self.partitions as u32,
            strong: self.strong,
            sc: self.sc,
            deliveries: self.deliveries,
            waiting,
            early: self.early.iter().map(|(&t, v)| (t, v.to_vec())).collect(),
            last_seq: self
                .last_seq
                .iter()
                .map(|(&o, l)| (o, l.seq, l.outcome))
                .collect(),
            outcomes: self.recent_outcomes().collect(),
            items,
        };
        let mut out = vec![IMAGE_TAG];
        // Encoding into a Vec cannot fail: every field is plain data.
        out.extend(postcard::to_stdvec(&image).unwrap_or_default());
        out
    }

    /// Partition `id` of `partitions` rebuilt from an [`Partition::image`]; bad bytes get an
    /// error, never a panic.
    pub fn from_image(
        id: PartitionId,
        partitions: usize,
        bytes: &[u8],
    ) -> Result<Partition, ImageError> {
        let body = match bytes.split_first() {
            Some((&IMAGE_TAG, body)) => body,
            _ => return Err(ImageError::Decode("bad tag".into())),
        };
        let img: PartitionImage =
            postcard::from_bytes(body).map_err(|e| ImageError::Decode(e.to_string()))?;
        if img.id != id || img.partitions as usize != partitions {
            return Err(ImageError::Mismatch {
                got: img.id,
                got_of: img.partitions,
                want: id,
                want_of: partitions as u32,
            });
        }
        let bad = ImageError::Invalid;
        let mut part = Partition::new(id, partitions);
        part.strong = img.strong;
        part.sc = img.sc;
        part.deliveries = img.deliveries;
        let here = |k: Key| partition_of(k, partitions) == id;
        let valid_other = |q: &PartitionId| (*q as usize) < partitions && *q != id;
        for w in img.waiting {
            if !w.others.iter().all(valid_other) || !w.missing.iter().all(valid_other) {
                return Err(bad("a waiting transaction names a bad partition"));
            }
            if !w.writes.iter().all(|&k| here(k)) {
                return Err(bad("a waiting transaction writes another partition's key"));
            }
            if let Some(v) = w.version {
                if v > img.sc {
                    return Err(bad("a waiting version above SC"));
                }
                part.decided.hold(v);
            }
            let waiting = Waiting {
                version: w.version,
                writes: SmallVec::from_vec(w.writes),
                others: SmallVec::from_vec(w.others),
                missing: SmallVec::from_vec(w.missing),
                commit: w.commit,
                reason: w.reason.map(reason_of).transpose()?,
                reply: w.reply,
            };
            part.waiting.insert(w.txn, waiting);
        }
        for (txn, votes) in img.early {
            if !votes.iter().all(|(q, _)| valid_other(q)) {
                return Err(bad("an early vote from a bad partition"));
            }
            part.early.insert(txn, SmallVec::from_vec(votes));
        }
        part.last_seq.extend(
            img.last_seq
                .into_iter()
                .map(|(o, seq, outcome)| (o, super::Last { seq, outcome })),
        );
        for (txn, outcome) in img.outcomes {
            if outcome.is_some_and(|v| v > img.sc) {
                return Err(bad("a remembered outcome above SC"));
            }
            part.remember(txn, outcome);
        }
        let mut store = Store::new(0);
        for item in img.items {
            if !here(item.key) {
                return Err(bad("an item of another partition"));
            }
            if item
                .committed
                .iter()
                .chain(&item.prepared)
                .any(|v| v.0 > img.sc)
            {
                return Err(bad("a version above SC"));
            }
            store.install_image(item);
        }
        part.store = store;
        Ok(part)
    }
}
