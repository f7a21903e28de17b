//! Wire frames: a big-endian `u32` length, then a batch of postcard-encoded messages back to back.
//!
//! The first frame on every connection is a hello naming the sender's [`Addr`]. Decoding checks every
//! bound and returns a [`WireError`]; no byte sequence makes it panic.

use postcard::ser_flavors::Flavor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Addr;

/// Bytes that open every hello frame.
pub const MAGIC: [u8; 4] = *b"PHDB";
/// Version of the frame layout and of the messages' encoding; peers with another version are
/// refused.
pub const WIRE_VERSION: u8 = 5;
/// The largest frame payload accepted from the network.
pub const MAX_FRAME: usize = 16 << 20;
/// Bytes of the length prefix.
pub const HEADER: usize = 4;

/// Why bytes from the network were refused.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A frame announced more bytes than [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    /// The connection did not open with a valid hello.
    #[error("bad hello frame: {0}")]
    BadHello(&'static str),
    /// A message in a batch could not be decoded.
    #[error("undecodable message at byte {offset} of a {len}-byte frame: {source}")]
    Decode {
        /// Where in the frame the message started.
        offset: usize,
        /// The frame's length.
        len: usize,
        /// What postcard reported.
        source: postcard::Error,
    },
}

/// Starts a frame at the end of `buf`; returns its start for [`finish_frame`].
pub fn begin_frame(buf: &mut Vec<u8>) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER]);
    start
}

/// Appends one message to the frame being built in `buf`; a message that fails to encode leaves
/// nothing of itself behind.
pub fn push_message<M: Serialize>(buf: &mut Vec<u8>, msg: &M) -> Result<(), postcard::Error> {
    let len = buf.len();
    postcard::serialize_with_flavor(msg, Append(buf)).inspect_err(|_| buf.truncate(len))
}

/// A postcard output that appends to a `Vec`. Postcard hands every integer to `try_extend` as a
/// 1–10-byte varint, and `Vec::extend_from_slice` makes a `memcpy` call for a length it cannot see
/// (about 4% of a cluster's CPU in profiles); short runs are pushed byte by byte instead.
struct Append<'a>(&'a mut Vec<u8>);

impl Flavor for Append<'_> {
    type Output = ();

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        if data.len() <= 16 {
            self.0.reserve(data.len());
            for &b in data {
                self.0.push(b);
            }
        } else {
            self.0.extend_from_slice(data);
        }
        Ok(())
    }

    #[inline]
    fn try_push(&mut self, b: u8) -> postcard::Result<()> {
        self.0.push(b);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Writes the length of the frame that starts at `start` into its header.
pub fn finish_frame(buf: &mut [u8], start: usize) {
    let len = (buf.len() - start - HEADER) as u32;
    buf[start..start + HEADER].copy_from_slice(&len.to_be_bytes());
}

/// Bytes of the payload of the frame that starts at `start`.
pub fn frame_payload_len(buf: &[u8], start: usize) -> usize {
    buf.len() - start - HEADER
}

/// A complete hello frame (header included) announcing `addr`.
pub fn hello_frame(addr: Addr) -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEADER + 9);
    let start = begin_frame(&mut buf);
    buf.extend_from_slice(&MAGIC);
    buf.push(WIRE_VERSION);
    buf.extend_from_slice(&addr.to_le_bytes());
    finish_frame(&mut buf, start);
    buf
}

/// Reads the address announced by a hello frame's payload.
pub fn decode_hello(payload: &[u8]) -> Result<Addr, WireError> {
    if payload.len() != 9 {
        return Err(WireError::BadHello("wrong length"));
    }
    if payload[..4] != MAGIC {
        return Err(WireError::BadHello("not a phasedb peer"));
    }
    if payload[4] != WIRE_VERSION {
        return Err(WireError::BadHello("unsupported wire version"));
    }
    let mut addr = [0u8; 4];
    addr.copy_from_slice(&payload[5..9]);
    Ok(Addr::from_le_bytes(addr))
}

/// Decodes every message of a frame payload into `out`; on error `out` keeps the messages before it.
pub fn decode_batch<M: DeserializeOwned>(
    payload: &[u8],
    out: &mut Vec<M>,
) -> Result<(), WireError> {
    if payload.len() > MAX_FRAME {
        return Err(WireError::TooLarge(payload.len()));
    }
    let mut rest = payload;
    while !rest.is_empty() {
        let offset = payload.len() - rest.len();
        let (msg, tail) =
            postcard::take_from_bytes::<M>(rest).map_err(|source| WireError::Decode {
                offset,
                len: payload.len(),
                source,
            })?;
        out.push(msg);
        rest = tail;
    }
    Ok(())
}

/// Encodes `msgs` as one standalone frame (header included); used by tests and tools.
pub fn encode_frame<M: Serialize>(msgs: &[M]) -> Result<Vec<u8>, postcard::Error> {
    let mut buf = Vec::new();
    let start = begin_frame(&mut buf);
    for m in msgs {
        push_message(&mut buf, m)?;
    }
    finish_frame(&mut buf, start);
    Ok(buf)
}
