//! Read-set hints (our addition to RAMP): a first-round GET describes the reader's read set, and
//! the server answers a version's metadata only as far as the reader can use it ([`Meta::Siblings`]).
//! A reader consults a write set or filter only for items it reads, so its second-round decisions
//! are the same as with the full metadata.

use super::client::{RampKind, SMALL_READ_SET};
use crate::msg::{GetMode, Key, Meta, ReadSetHint, WriteSet};

/// A well-mixed 64-bit hash of a key (Fibonacci hashing); signatures and bitmaps take its top bits.
fn key_hash(key: Key) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A 64-bit signature of a reader's read set (one bit per item, by a hash of its key), sent with
/// RAMP-F first rounds so servers can trim write sets to the items the reader may have read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSig(pub u64);

impl ReadSig {
    fn bit(key: Key) -> u64 {
        1 << (key_hash(key) >> 58)
    }

    /// The signature of `keys`.
    pub fn of(keys: &[Key]) -> ReadSig {
        ReadSig(keys.iter().fold(0, |sig, &k| sig | Self::bit(k)))
    }

    /// False only if `key` is certainly not in the read set.
    pub fn may_contain(self, key: Key) -> bool {
        self.0 & Self::bit(key) != 0
    }
}

/// The server's view of a reader's read set, built once per GET from its [`ReadSetHint`] and
/// items; [`ReadSetFilter::trim`] answers metadata relative to it ([`Meta::Siblings`]).
pub struct ReadSetFilter<'a> {
    hint: &'a ReadSetHint,
    items: &'a [(Key, GetMode)],
    /// The whole read set, sorted, when it is named and too long to scan.
    sorted: Vec<Key>,
    /// A bitmap of `sorted` (about 32 bits per item) that rejects most other keys in one test.
    bits: Vec<u64>,
}

impl<'a> ReadSetFilter<'a> {
    /// The filter of a GET for `items` with `hint`.
    pub fn new(hint: &'a ReadSetHint, items: &'a [(Key, GetMode)]) -> Self {
        let mut filter = ReadSetFilter {
            hint,
            items,
            sorted: Vec::new(),
            bits: Vec::new(),
        };
        if let ReadSetHint::Others(others) = hint
            && others.len() + items.len() > SMALL_READ_SET
        {
            let mut all: Vec<Key> = filter.named().collect();
            all.sort_unstable();
            filter.bits = vec![0; (all.len() / 2).next_power_of_two()];
            for &k in &all {
                let (word, bit) = filter.bit_of(k);
                filter.bits[word] |= bit;
            }
            filter.sorted = all;
        }
        filter
    }

    fn bit_of(&self, k: Key) -> (usize, u64) {
        let h = key_hash(k) >> 32;
        (((h >> 6) as usize) & (self.bits.len() - 1), 1 << (h & 63))
    }

    fn named(&self) -> impl Iterator<Item = Key> + '_ {
        let others = match self.hint {
            ReadSetHint::Others(o) => &o[..],
            _ => &[],
        };
        self.items.iter().map(|r| r.0).chain(others.iter().copied())
    }

    /// False only if `k` is certainly not in the read set.
    fn may_contain(&self, k: Key) -> bool {
        match self.hint {
            ReadSetHint::None => true,
            ReadSetHint::Sig(sig) => ReadSig(*sig).may_contain(k),
            ReadSetHint::Others(_) if self.sorted.is_empty() => self.named().any(|x| x == k),
            ReadSetHint::Others(_) => {
                let (word, bit) = self.bit_of(k);
                self.bits[word] & bit != 0 && self.sorted.binary_search(&k).is_ok()
            }
        }
    }

    /// `meta` of a version of `key` reduced to the reader's possible siblings: a write set keeps the
    /// other items the read set may contain; a Bloom filter, given the read set's items, becomes the
    /// other read items it may contain. `None` when nothing is left; metadata the hint cannot reduce
    /// is kept.
    pub fn trim(&self, meta: &mut Meta, key: Key) {
        let siblings: WriteSet = match (&*meta, self.hint) {
            (_, ReadSetHint::None) => return,
            (Meta::WriteSet(ws), _) => ws
                .iter()
                .copied()
                .filter(|&k| k != key && self.may_contain(k))
                .collect(),
            (Meta::Bloom(b), ReadSetHint::Others(_)) => self
                .named()
                .filter(|&k| k != key && b.may_contain(k))
                .collect(),
            _ => return,
        };
        *meta = if siblings.is_empty() {
            Meta::None
        } else {
            Meta::Siblings(siblings)
        };
    }
}

/// The hint a RAMP client sends with the first-round GET to server `to`: a signature for short
/// RAMP-F read sets, the items elsewhere for long ones (a saturated signature would let whole write
/// sets through) and for short RAMP-H ones (a long read set would make a saturated filter answer
/// more items than the filter's own size).
pub fn read_set_hint(
    kind: RampKind,
    reads: &[Key],
    elsewhere: impl Iterator<Item = Key>,
) -> ReadSetHint {
    match kind {
        RampKind::Fast if reads.len() <= SMALL_READ_SET => ReadSetHint::Sig(ReadSig::of(reads).0),
        RampKind::Fast => ReadSetHint::Others(elsewhere.collect()),
        RampKind::Hybrid if reads.len() <= SMALL_READ_SET => {
            ReadSetHint::Others(elsewhere.collect())
        }
        _ => ReadSetHint::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::Bloom;
    use crate::msg::Ts;
    use crate::ramp::client::{FirstRound, second_round_fast, second_round_hybrid};

    fn v(key: Key, ts: Ts, meta: Meta) -> FirstRound {
        FirstRound { key, ts, meta }
    }

    /// Random first rounds over read set 0..n: versions with timestamps, written with random sets
    /// of items (some outside the read set).
    fn random_first_rounds(
        seed: u64,
        meta: impl Fn(&[Key]) -> Meta,
    ) -> (Vec<Key>, Vec<FirstRound>) {
        let n = if seed.is_multiple_of(10) {
            20 + seed % 30
        } else {
            2 + (seed % 7)
        };
        let read_set: Vec<Key> = (0..n).map(|k| k * 1_000_003).collect();
        let first = read_set
            .iter()
            .enumerate()
            .map(|(i, &key)| {
                let ts = (seed * 7 + i as u64 * 13) % 5;
                let mut ws: Vec<Key> = vec![key, 77 + seed, 5_000_011 * (seed % 3)];
                ws.extend(read_set.iter().filter(|&&k| (seed >> (k % 11)) & 1 == 1));
                let meta = if ts == 0 { Meta::None } else { meta(&ws) };
                v(key, ts, meta)
            })
            .collect();
        (read_set, first)
    }

    /// The server trims each first-round result as it would answer a GET for half the read set,
    /// with the hint the client sends.
    fn trimmed(first: &[FirstRound], read_set: &[Key], kind: RampKind) -> Vec<FirstRound> {
        let (here, elsewhere) = read_set.split_at(read_set.len() / 2);
        first
            .iter()
            .map(|f| {
                let (items, others) = if here.contains(&f.key) {
                    (here, elsewhere)
                } else {
                    (elsewhere, here)
                };
                let hint = read_set_hint(kind, read_set, others.iter().copied());
                let items: Vec<(Key, GetMode)> =
                    items.iter().map(|&k| (k, GetMode::Latest)).collect();
                let mut meta = f.meta.clone();
                ReadSetFilter::new(&hint, &items).trim(&mut meta, f.key);
                v(f.key, f.ts, meta)
            })
            .collect()
    }

    #[test]
    fn trimmed_metadata_leads_to_the_same_second_round() {
        let (mut trimmed_away, mut second_rounds) = (0, 0);
        for seed in 0..500u64 {
            let (read_set, first) = random_first_rounds(seed, |ws| Meta::WriteSet(ws.into()));
            let trim_fast = trimmed(&first, &read_set, RampKind::Fast);
            assert_eq!(
                second_round_fast(&first),
                second_round_fast(&trim_fast),
                "RAMP-F, seed {seed}"
            );
            let (read_set, first) =
                random_first_rounds(seed, |ws| Meta::Bloom(Bloom::of(ws.iter().copied(), 64, 2)));
            let trim_hybrid = trimmed(&first, &read_set, RampKind::Hybrid);
            assert_eq!(
                second_round_hybrid(&first),
                second_round_hybrid(&trim_hybrid),
                "RAMP-H, seed {seed}"
            );
            second_rounds += !second_round_fast(&first).is_empty() as usize;
            second_rounds += !second_round_hybrid(&first).is_empty() as usize;
            trimmed_away += trim_fast
                .iter()
                .chain(&trim_hybrid)
                .filter(|f| f.meta == Meta::None)
                .count();
        }
        assert!(
            trimmed_away > 500,
            "many results need no metadata: {trimmed_away}"
        );
        assert!(
            second_rounds > 200,
            "races needing a second round: {second_rounds}"
        );
    }

    #[test]
    fn a_read_signature_never_misses_an_item_of_the_read_set() {
        let keys: Vec<Key> = (0..40).map(|k| k * 7919).collect();
        let sig = ReadSig::of(&keys);
        assert!(keys.iter().all(|&k| sig.may_contain(k)));
        let small = ReadSig::of(&keys[..4]);
        let outside = (1000..2000u64).filter(|&k| small.may_contain(k)).count();
        assert!(
            outside < 150,
            "a 4-item signature admits few others: {outside}"
        );
    }
}
