//! The client-side decisions of RAMP: metadata for PUT_ALL and the second round of GET_ALL.

use rustc_hash::FxHashMap;

use crate::bloom::Bloom;
use crate::msg::{GetMode, Key, Meta, ReadSetHint, Ts, WriteSet};

/// A first-round version as the client holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstRound {
    /// The item.
    pub key: Key,
    /// Its lastCommit timestamp.
    pub ts: Ts,
    /// The writer's metadata.
    pub meta: Meta,
}

/// What the second-round decisions need of a first-round version; the client reads them straight
/// from its read slots.
pub trait FirstRoundView {
    /// The item.
    fn key(&self) -> Key;
    /// Its lastCommit timestamp.
    fn ts(&self) -> Ts;
    /// The writer's metadata.
    fn meta(&self) -> &Meta;
}

impl FirstRoundView for FirstRound {
    fn key(&self) -> Key {
        self.key
    }

    fn ts(&self) -> Ts {
        self.ts
    }

    fn meta(&self) -> &Meta {
        &self.meta
    }
}

/// The metadata a writer attaches: the write set (RAMP-F), a Bloom filter over it (RAMP-H) or nothing.
pub fn write_meta(kind: RampKind, keys: &[Key], bloom_bits: usize, bloom_hashes: u8) -> Meta {
    match kind {
        RampKind::Fast => Meta::WriteSet(keys.into()),
        RampKind::Small => Meta::None,
        RampKind::Hybrid => Meta::Bloom(Bloom::of(keys.iter().copied(), bloom_bits, bloom_hashes)),
    }
}

/// The three RAMP variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RampKind {
    /// RAMP-F.
    Fast,
    /// RAMP-S.
    Small,
    /// RAMP-H.
    Hybrid,
}

/// RAMP-F (Algorithm 1, lines 26–32): from every version's write set, the highest timestamp each
/// requested item should have; fetch by exact timestamp every item read below it.
pub fn second_round_fast<V: FirstRoundView>(first: &[V]) -> Vec<(Key, GetMode)> {
    if first.len() > SMALL_READ_SET {
        return second_round_fast_indexed(first);
    }
    let mut slots = [0 as Ts; SMALL_READ_SET];
    let want = &mut slots[..first.len()];
    for (w, v) in want.iter_mut().zip(first) {
        *w = v.ts();
    }
    for v in first {
        if let Meta::WriteSet(siblings) | Meta::Siblings(siblings) = v.meta() {
            for (w, r) in want.iter_mut().zip(first) {
                if v.ts() > *w && siblings.contains(&r.key()) {
                    *w = v.ts();
                }
            }
        }
    }
    first
        .iter()
        .zip(want.iter())
        .filter(|(v, want)| **want > v.ts())
        .map(|(v, want)| (v.key(), GetMode::Exact(*want)))
        .collect()
}

/// Read sets up to this size are matched against write sets by scanning; larger ones by a map.
const SMALL_READ_SET: usize = 16;

fn second_round_fast_indexed<V: FirstRoundView>(first: &[V]) -> Vec<(Key, GetMode)> {
    let mut latest: FxHashMap<Key, Ts> = FxHashMap::default();
    for v in first {
        latest.entry(v.key()).or_insert(0);
    }
    for v in first {
        if let Meta::WriteSet(siblings) | Meta::Siblings(siblings) = v.meta() {
            for k in siblings.iter() {
                if let Some(l) = latest.get_mut(k) {
                    *l = (*l).max(v.ts());
                }
            }
        }
    }
    first
        .iter()
        .filter_map(|v| {
            let want = latest[&v.key()];
            (want > v.ts()).then_some((v.key(), GetMode::Exact(want)))
        })
        .collect()
}

/// RAMP-S (Algorithm 2, lines 12–14): every item again, matched against the set of all first-round
/// timestamps, which the request carries once.
pub fn second_round_small<V: FirstRoundView>(first: &[V]) -> (Vec<(Key, GetMode)>, Vec<Ts>) {
    let mut set: Vec<Ts> = first.iter().map(|v| v.ts()).collect();
    set.sort_unstable();
    set.dedup();
    let reads = first
        .iter()
        .map(|v| (v.key(), GetMode::InRequestSet))
        .collect();
    (reads, set)
}

/// RAMP-H (Algorithm 3, lines 6–12): for every pair where version `vi` is newer than `vj` and `vi`'s
/// Bloom filter says `vj`'s item MAY be in `vi`'s write set, fetch `vj`'s item at `vi`'s timestamp.
/// A filter that answers "certainly not" means no sibling is missing, so nothing is fetched.
pub fn second_round_hybrid<V: FirstRoundView>(first: &[V]) -> Vec<(Key, GetMode)> {
    let mut fetch = Vec::new();
    for vj in first {
        let mut want: Vec<Ts> = Vec::new();
        for vi in first {
            if vi.ts() <= vj.ts() || want.contains(&vi.ts()) {
                continue;
            }
            let may_contain = match vi.meta() {
                Meta::Bloom(b) => b.may_contain(vj.key()),
                Meta::Siblings(s) => s.contains(&vj.key()),
                _ => false,
            };
            if may_contain {
                want.push(vi.ts());
            }
        }
        if !want.is_empty() {
            fetch.push((vj.key(), GetMode::InSet(want)));
        }
    }
    fetch
}

/// A 64-bit signature of a reader's read set (one bit per item, by a hash of its key), sent with
/// RAMP-F first rounds so servers can trim write sets to the items the reader may have read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSig(pub u64);

impl ReadSig {
    fn bit(key: Key) -> u64 {
        1 << (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
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
        let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
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

    fn v(key: Key, ts: Ts, meta: Meta) -> FirstRound {
        FirstRound { key, ts, meta }
    }

    #[test]
    fn fast_fetches_the_missing_sibling_by_timestamp() {
        // Figure 1: x1 committed with sibling y, y still at the initial version.
        let first = [
            v(1, 10, Meta::WriteSet(vec![1, 2].into())),
            v(2, 0, Meta::None),
        ];
        assert_eq!(second_round_fast(&first), vec![(2, GetMode::Exact(10))]);
        let atomic = [
            v(1, 10, Meta::WriteSet(vec![1, 2].into())),
            v(2, 10, Meta::WriteSet(vec![1, 2].into())),
        ];
        assert!(second_round_fast(&atomic).is_empty(), "no race, one round");
    }

    #[test]
    fn fast_scan_and_map_agree() {
        for seed in 0..200u64 {
            let n = 2 + (seed % 6) as usize;
            let first: Vec<FirstRound> = (0..n as u64)
                .map(|k| {
                    let ts = (seed * 7 + k * 13) % 5;
                    let ws: Vec<Key> = (0..n as u64).filter(|j| (seed >> j) & 1 == 1).collect();
                    v(k, ts, Meta::WriteSet(ws.into()))
                })
                .collect();
            assert_eq!(
                second_round_fast(&first),
                second_round_fast_indexed(&first),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn hybrid_fetches_only_when_the_filter_may_contain_the_item() {
        let with_y = Meta::Bloom(Bloom::of([1, 2], 256, 4));
        let first = [v(1, 10, with_y), v(2, 0, Meta::None)];
        assert_eq!(
            second_round_hybrid(&first),
            vec![(2, GetMode::InSet(vec![10]))]
        );
        let without_y = Meta::Bloom(Bloom::of([1], 256, 4));
        let first = [v(1, 10, without_y), v(2, 0, Meta::None)];
        assert!(
            second_round_hybrid(&first).is_empty(),
            "the filter says y is certainly not a sibling: no second round"
        );
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

    #[test]
    fn small_always_asks_every_item_with_every_timestamp() {
        let first = [v(1, 10, Meta::None), v(2, 0, Meta::None)];
        let (second, set) = second_round_small(&first);
        assert_eq!(second.len(), 2);
        assert!(second.iter().all(|(_, m)| *m == GetMode::InRequestSet));
        assert_eq!(set, [0, 10]);
    }
}
