//! The client protocol of `phasedb serve` (`docs/wire-protocol.md`).
//!
//! A connection is a stream of frames: a big-endian `u32` payload length, then the payload. The
//! client's first frame is a [`Hello`] (magic, version, token), answered by a frame holding a
//! `Result<Welcome, (ErrorKind, String)>`. Every later frame is `(id: u64 varint, body)`: a
//! [`Request`] from the client, the [`Response`] with the same id from the server. Requests are
//! pipelined: a client may send many before reading; a connection's responses come in request
//! order, and the ids let a client match them regardless.
//!
//! Decoding never panics: [`FrameReader`] checks the announced length against its limit before
//! buffering, and every payload is decoded by postcard, which reports malformed or truncated input
//! as an error (the fuzz-style property test in `tests/decode.rs` feeds it arbitrary bytes).

mod messages;
pub mod wire;

pub use messages::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Bytes that open every hello.
pub const MAGIC: [u8; 4] = *b"PHDC";
/// The protocol version this crate speaks; a hello with another one is refused.
pub const VERSION: u16 = 1;
/// Bytes of the length prefix.
pub const HEADER: usize = 4;
/// The default largest payload a server or client accepts.
pub const DEFAULT_MAX_FRAME: usize = 4 << 20;

/// Why bytes could not be read as a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// A frame announced more bytes than the limit.
    #[error("frame of {len} bytes exceeds the {limit}-byte limit")]
    TooLarge { len: usize, limit: usize },
    /// The payload is not a valid message (or has bytes left over after it).
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Appends a frame holding `msg` to `out`.
pub fn encode<M: Serialize>(out: &mut Vec<u8>, msg: &M) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    // Serialising these types into a Vec cannot fail (no maps, no unsized sequences).
    let payload = postcard::to_extend(msg, std::mem::take(out)).expect("postcard encodes to a Vec");
    *out = payload;
    let len = (out.len() - start - HEADER) as u32;
    out[start..start + HEADER].copy_from_slice(&len.to_be_bytes());
}

/// Appends a request frame.
pub fn encode_request(out: &mut Vec<u8>, id: u64, req: &Request) {
    encode(out, &(id, req));
}

/// Appends a response frame.
pub fn encode_response(out: &mut Vec<u8>, id: u64, resp: &Response) {
    encode(out, &(id, resp));
}

/// Decodes one payload as `M`, refusing trailing bytes.
pub fn decode<M: DeserializeOwned>(payload: &[u8]) -> Result<M, DecodeError> {
    match postcard::take_from_bytes::<M>(payload) {
        Ok((m, [])) => Ok(m),
        Ok((_, rest)) => Err(DecodeError::Malformed(format!(
            "{} bytes after the message",
            rest.len()
        ))),
        Err(e) => Err(DecodeError::Malformed(e.to_string())),
    }
}

/// Decodes a request payload: its id and the request.
pub fn decode_request(payload: &[u8]) -> Result<(u64, Request), DecodeError> {
    decode(payload)
}

/// Decodes a response payload: its id and the response.
pub fn decode_response(payload: &[u8]) -> Result<(u64, Response), DecodeError> {
    decode(payload)
}

/// The answer to a hello.
pub type HelloReply = Result<Welcome, (ErrorKind, String)>;

/// Splits a byte stream into frame payloads: bytes go in with [`FrameReader::extend`], whole
/// payloads come out of [`FrameReader::next_frame`]. A length above the limit is an error at once,
/// before any of its bytes are buffered.
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    limit: usize,
}

impl FrameReader {
    /// A reader refusing payloads longer than `limit`.
    pub fn new(limit: usize) -> FrameReader {
        FrameReader {
            buf: Vec::with_capacity(64 << 10),
            start: 0,
            limit,
        }
    }

    /// Adds bytes read from the stream.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// The buffer to read into directly: `spare` bytes of room at its end; call
    /// [`FrameReader::filled`] with how many were read.
    pub fn spare(&mut self, spare: usize) -> &mut [u8] {
        self.compact();
        let len = self.buf.len();
        self.buf.resize(len + spare, 0);
        &mut self.buf[len..]
    }

    /// Keeps `n` of the bytes last handed out by [`FrameReader::spare`].
    pub fn filled(&mut self, spare: usize, n: usize) {
        let keep = self.buf.len() - spare + n.min(spare);
        self.buf.truncate(keep);
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Bytes buffered that are not yet part of a returned frame.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole payload, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER {
            return Ok(None);
        }
        let len = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
        if len > self.limit {
            return Err(DecodeError::TooLarge {
                len,
                limit: self.limit,
            });
        }
        if avail.len() < HEADER + len {
            return Ok(None);
        }
        let from = self.start + HEADER;
        self.start = from + len;
        Ok(Some(&self.buf[from..from + len]))
    }
}
