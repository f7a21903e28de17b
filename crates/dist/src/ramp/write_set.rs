//! A RAMP-F write set as versions and read results carry it ([`Words`]: small sets in place), and
//! its wire form.

use std::fmt;
use std::ops::Deref;

use serde::de::{Error, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ramp::msg::Key;
use crate::ramp::words::{Builder, INLINE, Words};

/// The keys a transaction wrote.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteSet(Words);

impl Deref for WriteSet {
    type Target = [Key];

    fn deref(&self) -> &[Key] {
        &self.0
    }
}

impl From<&[Key]> for WriteSet {
    fn from(keys: &[Key]) -> WriteSet {
        WriteSet(keys.into())
    }
}

impl From<Vec<Key>> for WriteSet {
    fn from(keys: Vec<Key>) -> WriteSet {
        WriteSet(keys.into())
    }
}

impl FromIterator<Key> for WriteSet {
    fn from_iter<I: IntoIterator<Item = Key>>(iter: I) -> WriteSet {
        WriteSet(iter.into_iter().collect())
    }
}

impl fmt::Debug for WriteSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Bytes of one key as a LEB128 varint, at most.
const MAX_KEY_BYTES: usize = 10;

/// Appends `k` as a LEB128 varint.
fn put_varint(out: &mut [u8], mut at: usize, mut k: Key) -> usize {
    while k >= 0x80 {
        out[at] = (k as u8) | 0x80;
        k >>= 7;
        at += 1;
    }
    out[at] = k as u8;
    at + 1
}

/// Reads one LEB128 varint from the front of `b`; `None` if it is cut short or overflows.
fn take_varint(b: &[u8]) -> Option<(Key, &[u8])> {
    let mut k: Key = 0;
    for (i, &byte) in b.iter().enumerate().take(MAX_KEY_BYTES) {
        let bits = (byte & 0x7f) as Key;
        if i == MAX_KEY_BYTES - 1 && byte > 1 {
            return None;
        }
        k |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((k, &b[i + 1..]));
        }
    }
    None
}

/// On the wire a write set is one byte string of LEB128 keys: one length prefix and a tight loop
/// instead of a serde call per key.
impl Serialize for WriteSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut stack = [0u8; INLINE * MAX_KEY_BYTES];
        let mut heap = Vec::new();
        let buf: &mut [u8] = if self.len() <= INLINE {
            &mut stack
        } else {
            heap.resize(self.len() * MAX_KEY_BYTES, 0);
            &mut heap
        };
        let mut len = 0;
        for &k in self.iter() {
            len = put_varint(buf, len, k);
        }
        s.serialize_bytes(&buf[..len])
    }
}

struct Keys;

impl Visitor<'_> for Keys {
    type Value = WriteSet;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("item keys as LEB128 varints")
    }

    fn visit_bytes<E: Error>(self, mut b: &[u8]) -> Result<WriteSet, E> {
        let mut keys = Builder::default();
        while !b.is_empty() {
            let (k, rest) = take_varint(b).ok_or_else(|| E::custom("malformed key varint"))?;
            keys.push(k);
            b = rest;
        }
        Ok(WriteSet(keys.finish()))
    }
}

impl<'de> Deserialize<'de> for WriteSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WriteSet, D::Error> {
        d.deserialize_bytes(Keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_are_refused() {
        let mut buf = [0u8; MAX_KEY_BYTES];
        for k in [0, 1, 127, 128, 300, 1 << 40, u64::MAX] {
            let n = put_varint(&mut buf, 0, k);
            assert_eq!(take_varint(&buf[..n]), Some((k, &[][..])), "{k}");
        }
        assert_eq!(take_varint(&[0x80]), None, "cut short");
        assert_eq!(take_varint(&[0xff; 10]), None, "overflows 64 bits");
    }
}
