/// Builds a 64-bit primary key from several unsigned fields so that keys compare like the tuple of
/// fields (the first field most significant), e.g. TPC-C's (warehouse, district, order).
///
/// Each field declares its width in bits; a value that does not fit is a programming error and panics
/// in debug builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompositeKey {
    value: u64,
    bits: u32,
}

impl CompositeKey {
    /// An empty key to which fields are appended with [`CompositeKey::field`].
    pub const fn new() -> Self {
        CompositeKey { value: 0, bits: 0 }
    }

    /// Appends `value` as the next, less significant field of `bits` bits.
    pub const fn field(self, value: u64, bits: u32) -> Self {
        debug_assert!(bits > 0 && self.bits + bits <= 64);
        debug_assert!(bits == 64 || value < (1u64 << bits));
        let shifted = if bits == 64 { 0 } else { self.value << bits };
        CompositeKey {
            value: shifted | value,
            bits: self.bits + bits,
        }
    }

    /// The key, left-aligned so that a key with trailing fields omitted sorts before all its extensions
    /// (a prefix can serve as the low end of a range scan).
    pub const fn key(self) -> u64 {
        if self.bits == 0 {
            0
        } else if self.bits == 64 {
            self.value
        } else {
            self.value << (64 - self.bits)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_keys_sort_like_tuples() {
        let k = |w, d, o| {
            CompositeKey::new()
                .field(w, 16)
                .field(d, 8)
                .field(o, 32)
                .key()
        };
        let mut tuples = [(2, 1, 5), (1, 9, 7), (1, 9, 3), (2, 0, 100), (1, 10, 0)];
        let mut keys: Vec<u64> = tuples.iter().map(|&(w, d, o)| k(w, d, o)).collect();
        tuples.sort();
        keys.sort();
        let expect: Vec<u64> = tuples.iter().map(|&(w, d, o)| k(w, d, o)).collect();
        assert_eq!(keys, expect);
        let prefix = CompositeKey::new().field(1, 16).field(9, 8).key();
        assert!(
            prefix <= k(1, 9, 0)
                && k(1, 9, u32::MAX as u64) < CompositeKey::new().field(1, 16).field(10, 8).key()
        );
    }
}
