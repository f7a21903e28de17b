//! The framing of every durable file (logs and checkpoint images): a sequence of checksummed
//! blocks, so a torn or truncated tail is found and cut (SiloR §4.1: a crash may leave a partial
//! write at the end of a log).
//!
//! ```text
//! block := BLOCK_MAGIC (u32 LE) · kind (u8) · len (u32 LE) · crc32 (u32 LE) · payload (len bytes)
//! ```
//!
//! The checksum is a CRC-32 (the `crc32fast` crate, which folds with carry-less multiplies: the
//! logger checksums every byte a worker logs, so a byte-at-a-time or word-chained hash showed in its
//! profile) of the kind, the length and the payload. A reader takes blocks from the start
//! and stops at the first one that is incomplete, misframed or fails its checksum: everything
//! before it is whole, nothing after it is trusted.

/// First bytes of every block.
pub(crate) const BLOCK_MAGIC: u32 = 0x5044_4232; // "PDB2"
/// Bytes before a block's payload.
pub(crate) const HEADER: usize = 4 + 1 + 4 + 4;
/// Largest payload a reader accepts (a longer length is corruption).
pub(crate) const MAX_PAYLOAD: usize = 256 << 20;

/// What a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Log records in the replication record format (`crate::star` format), each with its TID.
    Records = 1,
    /// A logger's durable-epoch marker: every record of an epoch up to the payload's `u64` (LE) is
    /// in the blocks before it (SiloR's per-logger durable epoch).
    Durable = 2,
    /// Rows of a checkpoint image, in the replication record format (TID 0 allowed: loaded rows).
    Rows = 3,
    /// The end of a checkpoint file: its row-record count (`u64` LE); a file without it is incomplete.
    End = 4,
    /// A checkpoint's description: generation and start epoch (two `u64` LE).
    Meta = 5,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Records,
            2 => Kind::Durable,
            3 => Kind::Rows,
            4 => Kind::End,
            5 => Kind::Meta,
            _ => return None,
        })
    }
}

/// Appends a block of `kind` holding `payload` to `out`.
pub(crate) fn push(out: &mut Vec<u8>, kind: Kind, payload: &[u8]) {
    out.extend_from_slice(&header(kind, payload));
    out.extend_from_slice(payload);
}

/// The header of a block of `kind` holding `payload`: written before the payload, a block can be
/// written from the payload's own buffer without copying it.
pub(crate) fn header(kind: Kind, payload: &[u8]) -> [u8; HEADER] {
    let len = u32::try_from(payload.len()).expect("a block payload fits u32");
    let mut h = [0u8; HEADER];
    h[0..4].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
    h[4] = kind as u8;
    h[5..9].copy_from_slice(&len.to_le_bytes());
    h[9..13].copy_from_slice(&checksum(kind as u8, len, payload).to_le_bytes());
    h
}

/// The whole blocks at the start of `bytes`, and where they end (the length of the trusted prefix).
pub(crate) fn read(bytes: &[u8]) -> (Vec<(Kind, &[u8])>, usize) {
    let mut blocks = Vec::new();
    let mut at = 0;
    while let Some((kind, payload, next)) = one(bytes, at) {
        blocks.push((kind, payload));
        at = next;
    }
    (blocks, at)
}

/// The block at `at`, if it is whole and its checksum holds.
fn one(bytes: &[u8], at: usize) -> Option<(Kind, &[u8], usize)> {
    let head = bytes.get(at..at.checked_add(HEADER)?)?;
    if u32::from_le_bytes(head[0..4].try_into().ok()?) != BLOCK_MAGIC {
        return None;
    }
    let kind = Kind::from_u8(head[4])?;
    let len = u32::from_le_bytes(head[5..9].try_into().ok()?);
    if len as usize > MAX_PAYLOAD {
        return None;
    }
    let sum = u32::from_le_bytes(head[9..13].try_into().ok()?);
    let start = at + HEADER;
    let payload = bytes.get(start..start + len as usize)?;
    (checksum(head[4], len, payload) == sum).then_some((kind, payload, start + len as usize))
}

/// The CRC-32 of a block's kind, length and payload: detects torn and garbled writes.
pub(crate) fn checksum(kind: u8, len: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(&len.to_le_bytes());
    h.update(payload);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_back_and_a_torn_tail_is_cut_at_the_last_whole_block() {
        let mut bytes = Vec::new();
        push(&mut bytes, Kind::Records, b"first block");
        push(&mut bytes, Kind::Durable, &7u64.to_le_bytes());
        let whole = bytes.len();
        push(&mut bytes, Kind::Records, b"third block, torn");
        for cut in whole..bytes.len() {
            let (blocks, end) = read(&bytes[..cut]);
            assert_eq!(blocks.len(), 2, "cut at {cut}");
            assert_eq!(end, whole);
        }
        let (blocks, end) = read(&bytes);
        assert_eq!((blocks.len(), end), (3, bytes.len()));
        assert_eq!(blocks[1], (Kind::Durable, &7u64.to_le_bytes()[..]));
    }

    #[test]
    fn a_flipped_byte_fails_the_checksum_and_ends_the_trusted_prefix() {
        let mut bytes = Vec::new();
        push(&mut bytes, Kind::Records, b"a");
        let first = bytes.len();
        push(&mut bytes, Kind::Records, b"the second block's payload");
        push(&mut bytes, Kind::Records, b"c");
        for i in first..bytes.len() - HEADER - 1 {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            let (blocks, end) = read(&bad);
            assert!(blocks.len() <= 2, "flip at {i}");
            if blocks.len() == 1 {
                assert_eq!(end, first);
            }
        }
    }
}
