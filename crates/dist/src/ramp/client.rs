//! The client-side decisions of RAMP: metadata for PUT_ALL and the second round of GET_ALL.

use rustc_hash::FxHashMap;

use crate::bloom::Bloom;
use crate::msg::{GetMode, Key, Meta, Ts};

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

/// The metadata a writer attaches: the write set (RAMP-F), a Bloom filter over it (RAMP-H) or nothing.
pub fn write_meta(kind: RampKind, keys: &[Key], bloom_bits: usize, bloom_hashes: u8) -> Meta {
    match kind {
        RampKind::Fast => Meta::WriteSet(keys.to_vec()),
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
pub fn second_round_fast(first: &[FirstRound]) -> Vec<(Key, GetMode)> {
    let mut latest: FxHashMap<Key, Ts> = FxHashMap::default();
    for v in first {
        latest.entry(v.key).or_insert(0);
    }
    for v in first {
        if let Meta::WriteSet(siblings) = &v.meta {
            for k in siblings {
                if let Some(l) = latest.get_mut(k) {
                    *l = (*l).max(v.ts);
                }
            }
        }
    }
    first
        .iter()
        .filter_map(|v| {
            let want = latest[&v.key];
            (want > v.ts).then_some((v.key, GetMode::Exact(want)))
        })
        .collect()
}

/// RAMP-S (Algorithm 2, lines 12–14): every item again, with the set of all first-round timestamps.
pub fn second_round_small(first: &[FirstRound]) -> Vec<(Key, GetMode)> {
    let mut set: Vec<Ts> = first.iter().map(|v| v.ts).collect();
    set.sort_unstable();
    set.dedup();
    first
        .iter()
        .map(|v| (v.key, GetMode::InSet(set.clone())))
        .collect()
}

/// RAMP-H (Algorithm 3, lines 6–12): for every pair where version `vi` is newer than `vj` and `vi`'s
/// Bloom filter says `vj`'s item MAY be in `vi`'s write set, fetch `vj`'s item at `vi`'s timestamp.
/// A filter that answers "certainly not" means no sibling is missing, so nothing is fetched.
pub fn second_round_hybrid(first: &[FirstRound]) -> Vec<(Key, GetMode)> {
    let mut fetch: Vec<(Key, Vec<Ts>)> = Vec::new();
    for vj in first {
        let mut want: Vec<Ts> = Vec::new();
        for vi in first {
            if vi.ts > vj.ts
                && let Meta::Bloom(b) = &vi.meta
                && b.may_contain(vj.key)
                && !want.contains(&vi.ts)
            {
                want.push(vi.ts);
            }
        }
        if !want.is_empty() {
            fetch.push((vj.key, want));
        }
    }
    fetch
        .into_iter()
        .map(|(k, set)| (k, GetMode::InSet(set)))
        .collect()
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
        let first = [v(1, 10, Meta::WriteSet(vec![1, 2])), v(2, 0, Meta::None)];
        assert_eq!(second_round_fast(&first), vec![(2, GetMode::Exact(10))]);
        let atomic = [
            v(1, 10, Meta::WriteSet(vec![1, 2])),
            v(2, 10, Meta::WriteSet(vec![1, 2])),
        ];
        assert!(second_round_fast(&atomic).is_empty(), "no race, one round");
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

    #[test]
    fn small_always_asks_every_item_with_every_timestamp() {
        let first = [v(1, 10, Meta::None), v(2, 0, Meta::None)];
        let second = second_round_small(&first);
        assert_eq!(second.len(), 2);
        assert!(
            second
                .iter()
                .all(|(_, m)| *m == GetMode::InSet(vec![0, 10]))
        );
    }
}
