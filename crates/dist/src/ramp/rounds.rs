//! The client-side decisions of RAMP: metadata for PUT_ALL and the second round of GET_ALL.

use rustc_hash::FxHashMap;

use crate::ramp::bloom::Bloom;
use crate::ramp::msg::{GetMode, Key, Meta, Ts};

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
pub fn write_meta(
    kind: RampKind,
    keys: impl Iterator<Item = Key>,
    bloom_bits: usize,
    bloom_hashes: u8,
) -> Meta {
    match kind {
        RampKind::Fast => Meta::WriteSet(keys.collect()),
        RampKind::Small => Meta::None,
        RampKind::Hybrid => Meta::Bloom(Bloom::of(keys, bloom_bits, bloom_hashes)),
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
pub(crate) const SMALL_READ_SET: usize = 16;

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
    let reads = first
        .iter()
        .map(|v| (v.key(), GetMode::InRequestSet))
        .collect();
    (reads, first_round_timestamps(first))
}

/// RAMP-H (Algorithm 3, lines 6–12): an item is fetched again when the Bloom filter of a newer
/// first-round version says it MAY be a sibling; filters that answer "certainly not" leave it as
/// read. The paper asks each such item for its highest version among those newer
/// timestamps. Here every fetched item is matched against the set of all first-round timestamps,
/// which the request carries once, as RAMP-S's does ([`GetMode::InRequestSet`]). The answer is the
/// same wherever it matters: a version of the item above the first round's with a timestamp in
/// the set was written by a transaction whose filter holds the item, so it is one the paper's
/// request names; anything else is not newer, and the client keeps its first-round version. Every
/// timestamp in the set is a committed transaction's, as in RAMP-S, so a prepared version found
/// through it may be committed early (§4.7). Large transactions saturate filters, where per-item
/// sets would grow with the square of the read set in the request and in the client's work.
pub fn second_round_hybrid<V: FirstRoundView>(first: &[V]) -> (Vec<(Key, GetMode)>, Vec<Ts>) {
    // Each writing transaction once, newest first (its items share its timestamp and filter).
    let mut writers: Vec<(Ts, &Meta)> = first
        .iter()
        .filter(|v| matches!(v.meta(), Meta::Bloom(_) | Meta::Siblings(_)))
        .map(|v| (v.ts(), v.meta()))
        .collect();
    writers.sort_unstable_by_key(|w| std::cmp::Reverse(w.0));
    writers.dedup_by_key(|w| w.0);
    let fetch: Vec<(Key, GetMode)> = first
        .iter()
        .filter(|vj| {
            writers
                .iter()
                .take_while(|w| w.0 > vj.ts())
                .any(|(_, meta)| match meta {
                    Meta::Bloom(b) => b.may_contain(vj.key()),
                    Meta::Siblings(s) => s.contains(&vj.key()),
                    _ => false,
                })
        })
        .map(|vj| (vj.key(), GetMode::InRequestSet))
        .collect();
    if fetch.is_empty() {
        return (fetch, Vec::new());
    }
    (fetch, first_round_timestamps(first))
}

/// The distinct first-round timestamps, ascending.
fn first_round_timestamps<V: FirstRoundView>(first: &[V]) -> Vec<Ts> {
    let mut set: Vec<Ts> = first.iter().map(|v| v.ts()).collect();
    set.sort_unstable();
    set.dedup();
    set
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
            (vec![(2, GetMode::InRequestSet)], vec![0, 10])
        );
        let without_y = Meta::Bloom(Bloom::of([1], 256, 4));
        let first = [v(1, 10, without_y), v(2, 0, Meta::None)];
        assert!(
            second_round_hybrid(&first).0.is_empty(),
            "the filter says y is certainly not a sibling: no second round"
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
