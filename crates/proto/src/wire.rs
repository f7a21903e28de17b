//! Allocation-free reading and writing of the hot messages, byte for byte the postcard encoding of
//! the types in [`crate::messages`] (`docs/wire-protocol.md`), so nothing changes on the wire.
//!
//! The server reads one-shot [`Request::Execute`](crate::Request::Execute) frames as [`OpView`]s
//! borrowing the received bytes and writes their results straight into its output buffer; the
//! client writes requests and reads the kind of each response without building the owned
//! messages. A view is checked whole when it is read ([`decode_execute`]), so walking it later
//! cannot fail; reading never panics on any input.

use crate::DecodeError;

/// Variant index of `Request::Execute`.
pub const REQUEST_EXECUTE: u32 = 6;
/// Variant index of `Response::Results`.
pub const RESPONSE_RESULTS: u32 = 5;
/// Variant index of `Response::Aborted`.
pub const RESPONSE_ABORTED: u32 = 9;
/// Variant index of `Response::Error`.
pub const RESPONSE_ERROR: u32 = 11;

/// Variant indexes of `Op`.
pub mod op {
    pub const GET: u32 = 0;
    pub const INSERT: u32 = 1;
    pub const UPDATE: u32 = 2;
    pub const PUT: u32 = 3;
    pub const DELETE: u32 = 4;
    pub const SCAN: u32 = 5;
    pub const APPLY: u32 = 6;
    pub const ORDERED: u32 = 7;
}

/// Variant indexes of `Value`.
pub mod value {
    pub const U64: u8 = 0;
    pub const I64: u8 = 1;
    pub const F64: u8 = 2;
    pub const BYTES: u8 = 3;
    pub const TUPLES: u8 = 4;
}

/// Variant indexes of `OpResult`.
pub mod result {
    pub const ROW: u8 = 0;
    pub const DONE: u8 = 1;
    pub const ROWS: u8 = 2;
}

/// Appends `v` as a postcard varint (LEB128).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded, as postcard writes signed integers.
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends a byte string: its length, then its bytes.
#[inline]
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Starts a frame: reserves the length prefix; returns where the frame starts.
#[inline]
pub fn begin_frame(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; crate::HEADER]);
    start
}

/// Ends the frame begun at `start` by writing its payload length.
#[inline]
pub fn end_frame(out: &mut [u8], start: usize) {
    let len = (out.len() - start - crate::HEADER) as u32;
    out[start..start + crate::HEADER].copy_from_slice(&len.to_be_bytes());
}

/// Writes the start of a `Request::Execute` frame of `ops` operations with id `id`; write the
/// operations with [`put_get`], [`put_write`], then call [`end_frame`] with the returned start.
pub fn begin_execute(out: &mut Vec<u8>, id: u64, ops: usize) -> usize {
    let start = begin_frame(out);
    put_varint(out, id);
    put_varint(out, REQUEST_EXECUTE as u64);
    put_varint(out, ops as u64);
    start
}

/// Appends `Op::Get { table, key, columns }`.
pub fn put_get(out: &mut Vec<u8>, table: u32, key: u64, columns: &[u16]) {
    put_varint(out, op::GET as u64);
    put_varint(out, table as u64);
    put_varint(out, key);
    put_varint(out, columns.len() as u64);
    for &c in columns {
        put_varint(out, c as u64);
    }
}

/// Appends `Op::Insert`, `Op::Update` or `Op::Put` (`kind`: [`op::INSERT`], ...) writing byte
/// strings `values` (column, bytes).
pub fn put_write<'v>(
    out: &mut Vec<u8>,
    kind: u32,
    table: u32,
    key: u64,
    values: impl ExactSizeIterator<Item = (u16, &'v [u8])>,
) {
    put_varint(out, kind as u64);
    put_varint(out, table as u64);
    put_varint(out, key);
    put_varint(out, values.len() as u64);
    for (c, b) in values {
        put_varint(out, c as u64);
        out.push(value::BYTES);
        put_bytes(out, b);
    }
}

/// A reader of postcard's encoding over a byte slice.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    buf: &'a [u8],
}

fn malformed(what: &str) -> DecodeError {
    DecodeError::Malformed(what.to_string())
}

impl<'a> Cursor<'a> {
    #[inline]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let (&b, rest) = self
            .buf
            .split_first()
            .ok_or_else(|| malformed("truncated"))?;
        self.buf = rest;
        Ok(b)
    }

    /// A varint of at most `max` bytes whose last byte is at most `last` (postcard's checks).
    #[inline]
    fn varint(&mut self, max: u32, last: u8) -> Result<u64, DecodeError> {
        // Most are one byte.
        if let Some((&b, rest)) = self.buf.split_first()
            && b < 0x80
        {
            self.buf = rest;
            return Ok(b as u64);
        }
        self.varint_long(max, last)
    }

    #[cold]
    fn varint_long(&mut self, max: u32, last: u8) -> Result<u64, DecodeError> {
        let mut out = 0u64;
        for i in 0..max {
            let b = self.byte()?;
            out |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                if i == max - 1 && b > last {
                    return Err(malformed("bad varint"));
                }
                return Ok(out);
            }
        }
        Err(malformed("bad varint"))
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.varint(10, 0x01)
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(self.varint(5, 0x0f)? as u32)
    }

    #[inline]
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(self.varint(3, 0x03)? as u16)
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let z = self.u64()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed("bad bool")),
        }
    }

    #[inline]
    fn take(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() as u64 {
            return Err(malformed("truncated"));
        }
        let (b, rest) = self.buf.split_at(n as usize);
        self.buf = rest;
        Ok(b)
    }

    #[inline]
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u64()?;
        self.take(n)
    }

    #[inline]
    fn value(&mut self) -> Result<ValueView<'a>, DecodeError> {
        Ok(match self.u32()? {
            0 => ValueView::U64(self.u64()?),
            1 => ValueView::I64(self.i64()?),
            2 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                ValueView::F64(f64::from_le_bytes(a))
            }
            3 => ValueView::Bytes(self.bytes()?),
            4 => {
                let n = self.u64()?;
                for _ in 0..n {
                    self.i64()?;
                    self.u32()?;
                    self.bytes()?;
                }
                ValueView::Tuples
            }
            _ => return Err(malformed("bad value variant")),
        })
    }

    /// A sequence of `n` items each read by `item`, as the raw bytes they span.
    fn seq(
        &mut self,
        mut item: impl FnMut(&mut Cursor<'a>) -> Result<(), DecodeError>,
    ) -> Result<(usize, &'a [u8]), DecodeError> {
        let n = self.u64()?;
        let from = self.buf;
        for _ in 0..n {
            item(self)?;
        }
        let used = from.len() - self.buf.len();
        Ok((n as usize, &from[..used]))
    }

    fn columns(&mut self) -> Result<Columns<'a>, DecodeError> {
        let (n, raw) = self.seq(|c| c.u16().map(|_| ()))?;
        Ok(Columns { n, raw })
    }

    fn values(&mut self) -> Result<Values<'a>, DecodeError> {
        let (n, raw) = self.seq(|c| {
            c.u16()?;
            c.value().map(|_| ())
        })?;
        Ok(Values { n, raw })
    }

    fn op(&mut self) -> Result<OpView<'a>, DecodeError> {
        let kind = self.u32()?;
        Ok(match kind {
            op::GET => OpView::Get {
                table: self.u32()?,
                key: self.u64()?,
                columns: self.columns()?,
            },
            op::INSERT | op::UPDATE | op::PUT => {
                let (table, key, values) = (self.u32()?, self.u64()?, self.values()?);
                let kind = match kind {
                    op::INSERT => WriteKind::Insert,
                    op::UPDATE => WriteKind::Update,
                    _ => WriteKind::Put,
                };
                OpView::Write {
                    kind,
                    table,
                    key,
                    values,
                }
            }
            op::DELETE => OpView::Delete {
                table: self.u32()?,
                key: self.u64()?,
            },
            op::SCAN => OpView::Scan {
                table: self.u32()?,
                lo: self.u64()?,
                hi: self.u64()?,
                limit: self.u32()?,
                columns: self.columns()?,
            },
            op::APPLY => OpView::Apply {
                table: self.u32()?,
                key: self.u64()?,
                column: self.u16()?,
                op: match self.u32()? {
                    0 => crate::Arith::Add,
                    1 => crate::Arith::Max,
                    2 => crate::Arith::Min,
                    3 => crate::Arith::Mult,
                    _ => return Err(malformed("bad arith variant")),
                },
                arg: self.i64()?,
                commute: self.bool()?,
            },
            op::ORDERED => OpView::Ordered {
                table: self.u32()?,
                key: self.u64()?,
                column: self.u16()?,
                op: match self.u32()? {
                    0 => crate::OrderedOp::OPut,
                    1 => crate::OrderedOp::TopK,
                    _ => return Err(malformed("bad ordered-op variant")),
                },
                order: self.i64()?,
                value: self.bytes()?,
            },
            _ => return Err(malformed("bad op variant")),
        })
    }
}

/// A value as it lies in a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueView<'a> {
    U64(u64),
    I64(i64),
    F64(f64),
    Bytes(&'a [u8]),
    /// `Value::Tuples` (read only: no operation may write it; its content is not kept).
    Tuples,
}

/// The column list of a `Get` or `Scan`, as it lies in a request.
#[derive(Clone, Copy, Debug)]
pub struct Columns<'a> {
    n: usize,
    raw: &'a [u8],
}

impl<'a> Columns<'a> {
    /// How many columns are named (0: every column).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no column is named (every column is meant).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The column indexes.
    pub fn iter(&self) -> impl Iterator<Item = u16> + 'a {
        let mut c = Cursor { buf: self.raw };
        (0..self.n).map_while(move |_| c.u16().ok())
    }
}

/// The `(column, value)` list of a write, as it lies in a request.
#[derive(Clone, Copy, Debug)]
pub struct Values<'a> {
    n: usize,
    raw: &'a [u8],
}

impl<'a> Values<'a> {
    /// How many values.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The `(column, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u16, ValueView<'a>)> + 'a {
        let mut c = Cursor { buf: self.raw };
        (0..self.n).map_while(move |_| Some((c.u16().ok()?, c.value().ok()?)))
    }
}

/// Which of the row writes an [`OpView::Write`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Insert,
    Update,
    Put,
}

/// An [`Op`](crate::Op) as it lies in a request, borrowing its bytes.
#[derive(Clone, Copy, Debug)]
pub enum OpView<'a> {
    Get {
        table: u32,
        key: u64,
        columns: Columns<'a>,
    },
    /// `Op::Insert`, `Op::Update` or `Op::Put`.
    Write {
        kind: WriteKind,
        table: u32,
        key: u64,
        values: Values<'a>,
    },
    Delete {
        table: u32,
        key: u64,
    },
    Scan {
        table: u32,
        lo: u64,
        hi: u64,
        limit: u32,
        columns: Columns<'a>,
    },
    Apply {
        table: u32,
        key: u64,
        column: u16,
        op: crate::Arith,
        arg: i64,
        commute: bool,
    },
    Ordered {
        table: u32,
        key: u64,
        column: u16,
        op: crate::OrderedOp,
        order: i64,
        value: &'a [u8],
    },
}

/// The id and variant index of a request or response payload, if they can be read.
pub fn peek(payload: &[u8]) -> Option<(u64, u32)> {
    let mut c = Cursor { buf: payload };
    Some((c.u64().ok()?, c.u32().ok()?))
}

/// Reads a request payload as a one-shot `Execute` without allocating beyond `ops`' room:
/// `Ok(Some(id))` with its operations in `ops` (cleared first), `Ok(None)` if the payload is
/// another request (decode it with [`crate::decode_request`]), an error if it is an `Execute`
/// that postcard would refuse too (malformed, truncated, or bytes after it).
pub fn decode_execute<'a>(
    payload: &'a [u8],
    ops: &mut Vec<OpView<'a>>,
) -> Result<Option<u64>, DecodeError> {
    ops.clear();
    read_execute(payload, |op| ops.push(op))
}

/// The row an operation names by key (table, key): a scan names none.
pub fn row_of(op: &OpView<'_>) -> Option<(u32, u64)> {
    match *op {
        OpView::Get { table, key, .. }
        | OpView::Write { table, key, .. }
        | OpView::Delete { table, key, .. }
        | OpView::Apply { table, key, .. }
        | OpView::Ordered { table, key, .. } => Some((table, key)),
        OpView::Scan { .. } => None,
    }
}

/// [`decode_execute`] appending to `ops` (a batch's one-shots share one vector); on an error
/// `ops` is left as it was.
pub fn append_execute<'a>(
    payload: &'a [u8],
    ops: &mut Vec<OpView<'a>>,
) -> Result<Option<u64>, DecodeError> {
    let from = ops.len();
    let read = read_execute(payload, |op| ops.push(op));
    if !matches!(read, Ok(Some(_))) {
        ops.truncate(from);
    }
    read
}

fn read_execute<'a>(
    payload: &'a [u8],
    mut each: impl FnMut(OpView<'a>),
) -> Result<Option<u64>, DecodeError> {
    let mut c = Cursor { buf: payload };
    let id = c.u64()?;
    if c.u32()? != REQUEST_EXECUTE {
        return Ok(None);
    }
    let n = c.u64()?;
    for _ in 0..n {
        each(c.op()?);
    }
    if !c.buf.is_empty() {
        return Err(DecodeError::Malformed(format!(
            "{} bytes after the message",
            c.buf.len()
        )));
    }
    Ok(Some(id))
}
