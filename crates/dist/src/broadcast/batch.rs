//! Batches: the proposals a member gathers and proposes to raft as one log entry.
//!
//! Layout (little endian): the proposer's raft id (`u64`), its batch number (`u64`), the number
//! of payloads (`u32`), then each payload as a `u32` length and its bytes. The proposer's id and
//! number let it see its own batch delivered (and so count what it has in flight). Decoding checks
//! every bound first and never panics; a batch that does not decode is skipped by every member
//! alike, as they all hold the same bytes.

use bytes::Bytes;

/// Bytes of a batch header.
pub const HEADER: usize = 20;

/// Who proposed a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchId {
    /// The proposer's raft id.
    pub proposer: u64,
    /// The proposer's count of batches before this one.
    pub number: u64,
}

/// Why an entry's bytes are not a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Shorter than a header.
    #[error("batch of {0} bytes is shorter than its header")]
    Short(usize),
    /// A payload runs past the end.
    #[error("payload {0} runs past the end of the batch")]
    Truncated(u32),
    /// Bytes left after the announced payloads.
    #[error("{0} bytes after the last payload")]
    Trailing(usize),
}

/// Proposals gathered for the next entry.
#[derive(Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: u32,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            buf: vec![0; HEADER],
            count: 0,
        }
    }
}

impl BatchBuilder {
    /// Appends one proposal.
    pub fn push(&mut self, payload: &[u8]) {
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(payload);
        self.count += 1;
    }

    /// Number of proposals gathered.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when nothing is gathered.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes gathered (headers included).
    pub fn bytes(&self) -> usize {
        self.buf.len() - HEADER
    }

    /// The entry's bytes for batch `id`; the builder starts over empty.
    pub fn finish(&mut self, id: BatchId) -> Vec<u8> {
        self.buf[0..8].copy_from_slice(&id.proposer.to_le_bytes());
        self.buf[8..16].copy_from_slice(&id.number.to_le_bytes());
        self.buf[16..20].copy_from_slice(&self.count.to_le_bytes());
        self.count = 0;
        std::mem::replace(&mut self.buf, vec![0; HEADER])
    }
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Splits an entry into its batch id and payloads (slices of `data`, not copies); `payloads` is
/// cleared first and left empty on error.
pub fn decode(data: &Bytes, payloads: &mut Vec<Bytes>) -> Result<BatchId, BatchError> {
    payloads.clear();
    if data.len() < HEADER {
        return Err(BatchError::Short(data.len()));
    }
    let id = BatchId {
        proposer: le_u64(data, 0),
        number: le_u64(data, 8),
    };
    let count = le_u32(data, 16);
    let mut at = HEADER;
    for i in 0..count {
        if data.len() - at < 4 {
            payloads.clear();
            return Err(BatchError::Truncated(i));
        }
        let len = le_u32(data, at) as usize;
        at += 4;
        if data.len() - at < len {
            payloads.clear();
            return Err(BatchError::Truncated(i));
        }
        payloads.push(data.slice(at..at + len));
        at += len;
    }
    if at != data.len() {
        payloads.clear();
        return Err(BatchError::Trailing(data.len() - at));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_decodes_to_its_payloads_in_order() {
        let mut b = BatchBuilder::default();
        for p in [&b"a"[..], b"", b"hello"] {
            b.push(p);
        }
        let id = BatchId {
            proposer: 3,
            number: 9,
        };
        let data = Bytes::from(b.finish(id));
        assert!(b.is_empty());
        let mut out = Vec::new();
        assert_eq!(decode(&data, &mut out), Ok(id));
        assert_eq!(out, vec![&b"a"[..], b"", b"hello"]);
    }

    #[test]
    fn every_truncation_and_extension_of_a_batch_is_refused_without_panicking() {
        let mut b = BatchBuilder::default();
        b.push(b"abc");
        b.push(b"defgh");
        let data = b.finish(BatchId {
            proposer: 1,
            number: 0,
        });
        let mut out = Vec::new();
        for cut in 0..data.len() {
            let short = Bytes::copy_from_slice(&data[..cut]);
            assert!(decode(&short, &mut out).is_err(), "cut at {cut}");
            assert!(out.is_empty());
        }
        let mut long = data.clone();
        long.push(0);
        assert_eq!(
            decode(&Bytes::from(long), &mut out),
            Err(BatchError::Trailing(1))
        );
        let mut huge = data;
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode(&Bytes::from(huge), &mut out),
            Err(BatchError::Truncated(0))
        );
    }
}
