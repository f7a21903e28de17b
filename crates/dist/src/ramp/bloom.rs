//! The Bloom filter RAMP-H writers attach to versions (256 bits and 4 hashes by default).

use serde::{Deserialize, Serialize};

use crate::ramp::msg::Key;
use crate::ramp::words::{INLINE, Words};

/// A Bloom filter over item keys; it carries its own size so readers need no configuration.
/// Copies cost no allocation ([`Words`]: a default filter is held in place) and filters travel as
/// raw little-endian bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bloom {
    #[serde(with = "words_as_bytes")]
    words: Words,
    hashes: u8,
}

/// The paper's default size in bits.
pub const DEFAULT_BITS: usize = 256;
/// The paper's default number of hash functions.
pub const DEFAULT_HASHES: u8 = 4;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

fn positions(key: Key, nbits: usize, hashes: u8) -> impl Iterator<Item = usize> {
    let nbits = nbits as u64;
    let mask = nbits.is_power_of_two().then(|| nbits - 1);
    let h1 = mix(key);
    let h2 = mix(key ^ 0x9e37_79b9_7f4a_7c15) | 1;
    (0..hashes as u64).map(move |i| {
        let h = h1.wrapping_add(i.wrapping_mul(h2));
        match mask {
            Some(m) => (h & m) as usize,
            None => (h % nbits) as usize,
        }
    })
}

/// The filter's words on the wire: one byte string, eight little-endian bytes per word.
mod words_as_bytes {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    use crate::ramp::words::Words;

    /// Filters up to this many words are encoded without allocating.
    const STACK_WORDS: usize = 8;

    pub fn serialize<S: Serializer>(words: &Words, s: S) -> Result<S::Ok, S::Error> {
        let mut stack = [0u8; STACK_WORDS * 8];
        let mut heap = Vec::new();
        let buf: &mut [u8] = if words.len() <= STACK_WORDS {
            &mut stack[..words.len() * 8]
        } else {
            heap.resize(words.len() * 8, 0);
            &mut heap
        };
        for (chunk, w) in buf.chunks_exact_mut(8).zip(words.iter()) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        s.serialize_bytes(buf)
    }

    struct WordBytes;

    impl Visitor<'_> for WordBytes {
        type Value = Words;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Bloom filter words as bytes, a multiple of 8 long")
        }

        fn visit_bytes<E: Error>(self, b: &[u8]) -> Result<Words, E> {
            if !b.len().is_multiple_of(8) || b.len() > (1 << 16) / 8 {
                return Err(E::invalid_length(b.len(), &self));
            }
            Ok(b.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
                .collect())
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Words, D::Error> {
        d.deserialize_bytes(WordBytes)
    }
}

impl Bloom {
    /// An empty filter of `bits` bits (rounded up to a multiple of 64, at least 64) and `hashes` hashes.
    pub fn new(bits: usize, hashes: u8) -> Bloom {
        Bloom::of([], bits, hashes)
    }

    /// A filter holding `keys`.
    pub fn of(keys: impl IntoIterator<Item = Key>, bits: usize, hashes: u8) -> Bloom {
        let hashes = hashes.max(1);
        let nwords = bits.div_ceil(64).max(1);
        let mut inline = [0u64; INLINE];
        let mut heap = Vec::new();
        let words: &mut [u64] = if nwords <= INLINE {
            &mut inline[..nwords]
        } else {
            heap.resize(nwords, 0);
            &mut heap
        };
        let nbits = nwords * 64;
        for k in keys {
            for p in positions(k, nbits, hashes) {
                words[p / 64] |= 1 << (p % 64);
            }
        }
        Bloom {
            words: Words::from(&*words),
            hashes,
        }
    }

    fn positions(&self, key: Key) -> impl Iterator<Item = usize> + use<> {
        positions(key, self.words.len() * 64, self.hashes)
    }

    /// False only if `key` was certainly not inserted; true means it may have been.
    pub fn may_contain(&self, key: Key) -> bool {
        if self.words.is_empty() {
            return false;
        }
        self.positions(key)
            .all(|p| self.words[p / 64] & (1 << (p % 64)) != 0)
    }

    /// Size in bits.
    pub fn bits(&self) -> usize {
        self.words.len() * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_keys_are_always_found_and_false_positives_are_rare() {
        let b = Bloom::of([3, 17, 99, 12345], DEFAULT_BITS, DEFAULT_HASHES);
        for k in [3, 17, 99, 12345] {
            assert!(b.may_contain(k));
        }
        let fp = (100_000..110_000).filter(|&k| b.may_contain(k)).count();
        assert!(
            fp < 100,
            "{fp} false positives in 10000 with 4 keys in 256 bits"
        );
        assert!(!Bloom::new(256, 4).may_contain(3));
    }

    #[test]
    fn decoded_filters_with_no_words_answer_false() {
        let b = Bloom {
            words: Vec::new().into(),
            hashes: 4,
        };
        assert!(!b.may_contain(1));
    }

    #[test]
    fn filters_travel_as_bytes_and_come_back_equal() {
        use phasedb_net::wire::{HEADER, decode_batch, encode_frame};
        let b = Bloom::of([5, 6, 7], 512, 3);
        let frame = encode_frame(std::slice::from_ref(&b)).unwrap();
        assert!(frame.len() <= HEADER + 512 / 8 + 3, "{} bytes", frame.len());
        let mut back: Vec<Bloom> = Vec::new();
        decode_batch(&frame[HEADER..], &mut back).unwrap();
        assert_eq!(back, [b]);
        assert!(back[0].may_contain(6));
        let mut bad: Vec<Bloom> = Vec::new();
        assert!(decode_batch(&[3, 1, 2, 3, 4], &mut bad).is_err());
    }
}
