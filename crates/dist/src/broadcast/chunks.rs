//! Snapshots sent in chunks. A raft `MsgSnapshot` carries the application's whole state (P-DUR:
//! a partition's image), which may not fit one transport frame
//! ([`phasedb_net::wire::MAX_FRAME`]). A member sends a snapshot message larger than
//! [`crate::broadcast::BroadcastConfig::snapshot_chunk_bytes`] as numbered [`SnapshotChunk`]s,
//! each naming the whole message's length and checksum; the receiver gathers them in any order
//! ([`Assembly`]) and steps the raft message only once every chunk arrived and the bytes match
//! the length and checksum. Nothing is installed before: a lost chunk leaves the assembly
//! incomplete until raft sends the snapshot again (the follower's next rejection of an append),
//! whose chunks fill the gap; a chunk that contradicts the ones gathered (another length, count
//! or checksum) starts a new assembly, and a whole that fails its checksum is refused and
//! dropped. Only one assembly per sender and group is kept, and its size is bounded.

use serde::{Deserialize, Serialize};

use crate::broadcast::GroupId;
use crate::broadcast::wire::RaftBytes;

/// The largest snapshot message accepted in chunks (4 GiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 32;

/// The most chunks one snapshot message is split into (a sender with small chunks makes them
/// larger): bounds what a receiver allocates for an assembly before its bytes arrive.
pub const MAX_CHUNKS: u32 = 1 << 16;

/// One piece of a chunked snapshot message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotChunk {
    /// The broadcast group.
    pub group: GroupId,
    /// The whole raft message's length in bytes.
    pub total: u64,
    /// The whole raft message's [`checksum`].
    pub checksum: u64,
    /// The number of chunks.
    pub count: u32,
    /// This chunk's position, `0..count`.
    pub seq: u32,
    /// This chunk's bytes: `[seq * chunk, ...)` of the whole, the last one shorter.
    pub bytes: RaftBytes,
}

/// Why a chunk was refused; the assembly it would belong to is dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The header is impossible (no chunk, a position beyond the count, a size out of range).
    #[error("impossible snapshot chunk: {0}")]
    Invalid(&'static str),
    /// Every chunk arrived but the whole does not match its length or checksum.
    #[error("chunked snapshot does not match its checksum")]
    Corrupt,
}

/// A 64-bit checksum of `bytes` (FNV-1a over bytes, finished by a multiply-xorshift mix).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= bytes.len() as u64;
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// Splits raft message bytes `raft` of `group` into chunks of at most `chunk_bytes` (above 0).
pub fn split(group: GroupId, raft: &[u8], chunk_bytes: usize) -> Vec<SnapshotChunk> {
    let chunk_bytes = chunk_bytes
        .max(1)
        .max(raft.len().div_ceil(MAX_CHUNKS as usize));
    let count = raft.len().div_ceil(chunk_bytes).max(1);
    let (total, sum) = (raft.len() as u64, checksum(raft));
    (0..count)
        .map(|i| {
            let end = ((i + 1) * chunk_bytes).min(raft.len());
            SnapshotChunk {
                group,
                total,
                checksum: sum,
                count: count as u32,
                seq: i as u32,
                bytes: RaftBytes(raft[(i * chunk_bytes).min(end)..end].to_vec()),
            }
        })
        .collect()
}

/// The chunks of one snapshot message gathered so far from one sender.
#[derive(Debug)]
pub struct Assembly {
    total: u64,
    checksum: u64,
    parts: Vec<Option<Vec<u8>>>,
    /// Bytes gathered so far.
    held: u64,
    missing: usize,
}

impl Assembly {
    /// Adds `c` to the assembly in `slot` (starting one when there is none or `c` belongs to
    /// another message). Returns the whole raft message bytes once every chunk is in and they
    /// match; the slot is then empty. A refused chunk empties the slot.
    pub fn add(
        slot: &mut Option<Assembly>,
        c: &SnapshotChunk,
    ) -> Result<Option<Vec<u8>>, ChunkError> {
        let invalid = |why| Err(ChunkError::Invalid(why));
        let count = c.count as u64;
        let check = if c.count == 0 {
            Some("no chunk")
        } else if c.count > MAX_CHUNKS {
            Some("too many chunks")
        } else if c.seq >= c.count {
            Some("position beyond the count")
        } else if c.total > MAX_SNAPSHOT_BYTES {
            Some("snapshot too large")
        } else if count > c.total.max(1) {
            Some("more chunks than bytes")
        } else if c.bytes.0.len() as u64 > c.total {
            Some("chunk longer than the snapshot")
        } else {
            None
        };
        if let Some(why) = check {
            *slot = None;
            return invalid(why);
        }
        let same = slot.as_ref().is_some_and(|a| {
            a.total == c.total && a.checksum == c.checksum && a.parts.len() == c.count as usize
        });
        if !same {
            *slot = Some(Assembly {
                total: c.total,
                checksum: c.checksum,
                parts: vec![None; c.count as usize],
                held: 0,
                missing: c.count as usize,
            });
        }
        let a = slot.as_mut().expect("just set");
        let part = &mut a.parts[c.seq as usize];
        if part.is_none() {
            if a.held + c.bytes.0.len() as u64 > a.total {
                *slot = None;
                return invalid("chunks longer than the snapshot");
            }
            a.held += c.bytes.0.len() as u64;
            *part = Some(c.bytes.0.clone());
            a.missing -= 1;
        }
        if a.missing > 0 {
            return Ok(None);
        }
        let a = slot.take().expect("complete");
        let mut whole = Vec::with_capacity(a.total as usize);
        for p in a.parts.into_iter().flatten() {
            whole.extend_from_slice(&p);
        }
        if whole.len() as u64 != a.total || checksum(&whole) != a.checksum {
            return Err(ChunkError::Corrupt);
        }
        Ok(Some(whole))
    }

    /// Chunks still missing.
    pub fn missing(&self) -> usize {
        self.missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::seq::SliceRandom;
    use rand::{RngExt, SeedableRng};

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn chunks_in_any_order_rebuild_the_message_once_all_are_in() {
        let raft = message(10_000);
        let mut chunks = split(3, &raft, 1024);
        assert_eq!(chunks.len(), 10);
        assert!(chunks.iter().all(|c| c.bytes.0.len() <= 1024));
        chunks.shuffle(&mut SmallRng::seed_from_u64(1));
        let mut slot = None;
        let (last, rest) = chunks.split_last().unwrap();
        for c in rest {
            assert_eq!(Assembly::add(&mut slot, c), Ok(None));
        }
        assert_eq!(slot.as_ref().map(Assembly::missing), Some(1));
        assert_eq!(Assembly::add(&mut slot, last), Ok(Some(raft)));
        assert!(slot.is_none());
    }

    #[test]
    fn a_lost_chunk_is_filled_by_the_next_sending_and_repeats_change_nothing() {
        let raft = message(5_000);
        let chunks = split(0, &raft, 1000);
        let mut slot = None;
        for c in chunks.iter().filter(|c| c.seq != 2) {
            assert_eq!(Assembly::add(&mut slot, c), Ok(None));
            assert_eq!(Assembly::add(&mut slot, c), Ok(None), "a repeat");
        }
        // Sent again: every chunk but the lost one is a repeat.
        assert_eq!(Assembly::add(&mut slot, &chunks[0]), Ok(None));
        assert_eq!(Assembly::add(&mut slot, &chunks[2]), Ok(Some(raft)));
    }

    #[test]
    fn a_corrupt_chunk_is_refused_when_the_whole_is_checked_and_nothing_is_kept() {
        let raft = message(4_000);
        let mut chunks = split(0, &raft, 1000);
        chunks[1].bytes.0[10] ^= 1;
        let mut slot = None;
        for c in &chunks[..3] {
            assert_eq!(Assembly::add(&mut slot, c), Ok(None));
        }
        assert_eq!(
            Assembly::add(&mut slot, &chunks[3]),
            Err(ChunkError::Corrupt)
        );
        assert!(slot.is_none(), "dropped");
        // The snapshot sent again, intact, is accepted.
        let mut slot = None;
        let fresh = split(0, &raft, 1000);
        let got: Vec<_> = fresh.iter().map(|c| Assembly::add(&mut slot, c)).collect();
        assert_eq!(got.last(), Some(&Ok(Some(raft))));
    }

    #[test]
    fn a_chunk_of_another_message_starts_over() {
        let (a, b) = (message(3_000), message(3_001));
        let (ca, cb) = (split(0, &a, 1000), split(0, &b, 1000));
        let mut slot = None;
        assert_eq!(Assembly::add(&mut slot, &ca[0]), Ok(None));
        for c in &cb {
            let r = Assembly::add(&mut slot, c);
            if c.seq + 1 == c.count {
                assert_eq!(r, Ok(Some(b.clone())));
            } else {
                assert_eq!(r, Ok(None));
            }
        }
    }

    #[test]
    fn impossible_headers_are_refused() {
        let good = split(0, &message(100), 10)[3].clone();
        let cases = [
            (
                SnapshotChunk {
                    count: 0,
                    ..good.clone()
                },
                "no chunk",
            ),
            (
                SnapshotChunk {
                    seq: 10,
                    ..good.clone()
                },
                "position",
            ),
            (
                SnapshotChunk {
                    total: MAX_SNAPSHOT_BYTES + 1,
                    ..good.clone()
                },
                "too large",
            ),
            (
                SnapshotChunk {
                    count: 101,
                    seq: 100,
                    ..good.clone()
                },
                "more chunks",
            ),
            (
                SnapshotChunk {
                    count: MAX_CHUNKS + 1,
                    total: MAX_SNAPSHOT_BYTES,
                    ..good.clone()
                },
                "too many",
            ),
            (
                SnapshotChunk {
                    bytes: RaftBytes(vec![0; 101]),
                    ..good.clone()
                },
                "longer",
            ),
        ];
        for (c, why) in cases {
            let mut slot = None;
            match Assembly::add(&mut slot, &c) {
                Err(ChunkError::Invalid(w)) => assert!(w.contains(why), "{w} / {why}"),
                other => panic!("{why}: {other:?}"),
            }
            assert!(slot.is_none());
        }
    }

    #[test]
    fn random_chunks_never_panic_and_never_rebuild_a_message_that_fails_its_checksum() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mut slot = None;
        for _ in 0..20_000 {
            let count = rng.random_range(0..6u32);
            let total = rng.random_range(0..64u64);
            let len = rng.random_range(0..40usize);
            let c = SnapshotChunk {
                group: 0,
                total,
                checksum: rng.random_range(0..4u64),
                count,
                seq: rng.random_range(0..7u32),
                bytes: RaftBytes((0..len).map(|_| rng.random()).collect()),
            };
            if let Ok(Some(whole)) = Assembly::add(&mut slot, &c) {
                assert_eq!(checksum(&whole), c.checksum);
                assert_eq!(whole.len() as u64, c.total);
            }
        }
        let wire = postcard::to_stdvec(&split(1, &message(300), 100)[1]).unwrap();
        for cut in 0..wire.len() {
            assert!(postcard::from_bytes::<SnapshotChunk>(&wire[..cut]).is_err());
        }
    }
}
