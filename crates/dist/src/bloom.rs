//! The Bloom filter RAMP-H writers attach to versions (256 bits and 4 hashes by default).

use serde::{Deserialize, Serialize};

use crate::msg::Key;

/// A Bloom filter over item keys; it carries its own size so readers need no configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bloom {
    words: Vec<u64>,
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

impl Bloom {
    /// An empty filter of `bits` bits (rounded up to a multiple of 64, at least 64) and `hashes` hashes.
    pub fn new(bits: usize, hashes: u8) -> Bloom {
        Bloom {
            words: vec![0; bits.div_ceil(64).max(1)],
            hashes: hashes.max(1),
        }
    }

    /// A filter holding `keys`.
    pub fn of(keys: impl IntoIterator<Item = Key>, bits: usize, hashes: u8) -> Bloom {
        let mut b = Bloom::new(bits, hashes);
        for k in keys {
            b.insert(k);
        }
        b
    }

    fn positions(&self, key: Key) -> impl Iterator<Item = usize> + use<> {
        let nbits = (self.words.len() * 64) as u64;
        let h1 = mix(key);
        let h2 = mix(key ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..self.hashes as u64).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % nbits) as usize)
    }

    /// Adds a key.
    pub fn insert(&mut self, key: Key) {
        for p in self.positions(key) {
            self.words[p / 64] |= 1 << (p % 64);
        }
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
            words: Vec::new(),
            hashes: 4,
        };
        assert!(!b.may_contain(1));
    }
}
