//! The client endpoint's protocol: length-prefixed frames (a little-endian `u32`, then the
//! message in postcard). A connection carries up to [`MAX_TAGS`] transactions at once, each named
//! by a tag; a tag runs one transaction at a time: reads (any number of rounds), then a commit
//! or an abort. A read on an idle tag begins a transaction.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::ramp::msg::{Key, Value};

/// Transactions a connection may run at once (tags `0..MAX_TAGS`).
pub const MAX_TAGS: u8 = 64;

/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 1 << 20;

/// What a client sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Reads `keys` in transaction `tag` (beginning it if the tag is idle).
    Read {
        /// The transaction.
        tag: u8,
        /// The keys, answered in this order.
        keys: Vec<Key>,
    },
    /// Commits transaction `tag` with these writes (none: read-only).
    Commit {
        /// The transaction.
        tag: u8,
        /// The write set.
        writes: Vec<(Key, Value)>,
    },
    /// Gives transaction `tag` up.
    Abort {
        /// The transaction.
        tag: u8,
    },
}

/// What the endpoint answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// The values of a [`Request::Read`]'s keys, in its order (`None`: no such item).
    Values {
        /// The transaction.
        tag: u8,
        /// The values.
        values: Vec<Option<Value>>,
    },
    /// The transaction was aborted while reading (its snapshot was collected).
    Aborted {
        /// The transaction.
        tag: u8,
    },
    /// The outcome of a [`Request::Commit`].
    Outcome {
        /// The transaction.
        tag: u8,
        /// True if it committed.
        committed: bool,
    },
    /// The request broke the protocol; the endpoint closes the connection after this.
    Refused(String),
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The length prefix exceeds [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// The body is not a message, or bytes follow it.
    #[error("undecodable frame: {0}")]
    Decode(String),
}

/// Appends `msg` as one frame to `out`.
pub fn encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    postcard::to_io(msg, &mut *out).expect("writing to a vector cannot fail");
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Writes `msg` as one frame.
pub fn write<T: Serialize>(w: &mut impl Write, msg: &T, scratch: &mut Vec<u8>) -> io::Result<()> {
    scratch.clear();
    encode(msg, scratch);
    w.write_all(scratch)
}

/// Reads one frame into `buf` and decodes it. Never panics on arbitrary bytes.
pub fn read<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
) -> Result<T, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    buf.resize(len, 0);
    r.read_exact(buf)?;
    decode(buf)
}

/// Decodes one frame's body.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    let (msg, rest) =
        postcard::take_from_bytes(body).map_err(|e| FrameError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Decode(format!(
            "{} bytes after the message",
            rest.len()
        )));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused_without_panicking() {
        let msgs = vec![
            Request::Read {
                tag: 3,
                keys: vec![1, 2],
            },
            Request::Commit {
                tag: 3,
                writes: vec![(1, vec![9; 4])],
            },
            Request::Abort { tag: 0 },
        ];
        let mut out = Vec::new();
        for m in &msgs {
            encode(m, &mut out);
        }
        let mut r = &out[..];
        let mut buf = Vec::new();
        for m in &msgs {
            assert_eq!(&read::<Request>(&mut r, &mut buf).unwrap(), m);
        }
        assert!(matches!(
            read::<Request>(&mut r, &mut buf),
            Err(FrameError::Io(_))
        ));
        let huge = (MAX_FRAME as u32 + 1).to_le_bytes();
        assert!(matches!(
            read::<Request>(&mut &huge[..], &mut buf),
            Err(FrameError::TooLarge(_))
        ));
        let mut padded = Vec::new();
        encode(&msgs[2], &mut padded);
        padded.push(0);
        padded[0] += 1;
        assert!(matches!(
            read::<Request>(&mut &padded[..], &mut buf),
            Err(FrameError::Decode(_))
        ));
        let mut x = 11u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let junk: Vec<u8> = (0..(x % 24)).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            let _ = decode::<Request>(&junk);
        }
    }
}
