//! Read-set hints (our addition to RAMP): a first-round GET describes the reader's read set on the
//! other servers, and the server answers a version's metadata only as far as the reader can use it:
//! [`Meta::Siblings`], or nothing when the writer's items on other servers (summed up in the
//! sibling signature its PREPARE carried) share no signature bit with the reader's. A reader
//! consults a write set or filter only for items it reads, and never needs a sibling that the same
//! GET reads: a server commits every version it holds of one transaction in one step (COMMIT,
//! cooperative termination and faster commit detection alike), so a GET that returns a
//! transaction's version of one item returns versions at least as new of its other items there.
//! ("As new" by timestamp: RAMP versions carry no commit time, so lastCommit is the highest
//! timestamp; E-PCI, whose versions are ordered by commit time first, sends no hints.) Its
//! second-round decisions therefore come out the same, RAMP-H's minus fetches of same-server filter
//! false positives, which could only come back empty, or `Gone` once GC passed them and so restart
//! the read for nothing.

use super::rounds::{RampKind, SMALL_READ_SET};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::ramp::msg::{Key, Meta, ReadSetHint, Ts};

/// A well-mixed 64-bit hash of a key (Fibonacci hashing); signatures and bitmaps take its top bits.
fn key_hash(key: Key) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A 64-bit signature of a set of keys (one bit per item, by a hash of its key): of the reader's
/// items elsewhere in RAMP-F and RAMP-H first rounds, of the writer's items elsewhere in PREPAREs,
/// so servers can leave out or trim metadata the reader cannot use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSig(pub u64);

impl ReadSig {
    #[inline]
    fn bit(key: Key) -> u64 {
        1 << (key_hash(key) >> 58)
    }

    /// The signature of `keys`.
    pub fn of(keys: impl IntoIterator<Item = Key>) -> ReadSig {
        ReadSig(keys.into_iter().fold(0, |sig, k| sig | Self::bit(k)))
    }

    /// False only if `key` is certainly not in the set.
    #[inline]
    pub fn may_contain(self, key: Key) -> bool {
        self.0 & Self::bit(key) != 0
    }
}

/// The server's view of a reader's read set on other servers, built once per GET from its
/// [`ReadSetHint`]; [`ReadSetFilter::siblings`] answers metadata relative to it ([`Meta::Siblings`]).
/// Two words for a signature or no hint (every GET of every algorithm builds one); the state of a
/// long named read set is built only for one.
pub struct ReadSetFilter<'a> {
    hint: &'a ReadSetHint,
    long: Option<Box<LongReadSet>>,
}

/// A long read set named item by item (RAMP-F read sets past [`SMALL_READ_SET`]).
struct LongReadSet {
    /// The items elsewhere, sorted.
    sorted: Vec<Key>,
    /// A bitmap of `sorted` (about 32 bits per item) that rejects most other keys in one test.
    bits: Vec<u64>,
    /// The answers already given in this GET, by writer: the answer then depends only on the write
    /// set, which every version of one transaction shares, and a long write set costs a test per
    /// key. (The item itself is never among the items elsewhere.)
    answered: FxHashMap<Ts, Meta>,
}

impl LongReadSet {
    fn new(others: &[Key]) -> LongReadSet {
        let mut sorted = others.to_vec();
        sorted.sort_unstable();
        let mut bits = vec![0; (sorted.len() / 2).next_power_of_two()];
        for &k in &sorted {
            let (word, bit) = Self::bit_of(bits.len(), k);
            bits[word] |= bit;
        }
        LongReadSet {
            sorted,
            bits,
            answered: FxHashMap::default(),
        }
    }

    /// The word and bit of `k` in a bitmap of `words` words (a power of two).
    fn bit_of(words: usize, k: Key) -> (usize, u64) {
        let h = key_hash(k) >> 32;
        (((h >> 6) as usize) & (words - 1), 1 << (h & 63))
    }

    fn may_contain(&self, k: Key) -> bool {
        let (word, bit) = Self::bit_of(self.bits.len(), k);
        self.bits[word] & bit != 0 && self.sorted.binary_search(&k).is_ok()
    }
}

impl<'a> ReadSetFilter<'a> {
    /// The filter of a GET with `hint`.
    pub fn new(hint: &'a ReadSetHint) -> Self {
        let long = match hint {
            ReadSetHint::Others(others) if others.len() > SMALL_READ_SET => {
                Some(Box::new(LongReadSet::new(others)))
            }
            _ => None,
        };
        ReadSetFilter { hint, long }
    }

    /// False only if `k` is certainly not read elsewhere.
    fn may_contain(&self, k: Key) -> bool {
        if let Some(long) = &self.long {
            return long.may_contain(k);
        }
        match self.hint {
            ReadSetHint::None => true,
            ReadSetHint::Sig(sig) => ReadSig(*sig).may_contain(k),
            ReadSetHint::Others(o) => o.contains(&k),
        }
    }

    /// What to answer of `meta`, the metadata of a version of `key`: a write set becomes the other
    /// items it may share with the read set elsewhere, `None` when there are none; metadata the hint
    /// cannot reduce (a Bloom filter, which names no items) is answered whole. `sibling_sig` is the
    /// version's signature of its writer's items on other servers (from its PREPARE): a read
    /// signature disjoint from it settles the answer as `None` without reading the metadata. `ts`
    /// is the version's timestamp.
    pub fn siblings(&mut self, meta: &Meta, sibling_sig: u64, key: Key, ts: Ts) -> Meta {
        if let &ReadSetHint::Sig(read) = self.hint
            && read & sibling_sig == 0
        {
            return Meta::None;
        }
        let memo = matches!(meta, Meta::WriteSet(_));
        if memo && let Some(m) = self.long.as_ref().and_then(|l| l.answered.get(&ts)) {
            return m.clone();
        }
        let m = self.trim(meta, key);
        if memo && let Some(long) = &mut self.long {
            long.answered.insert(ts, m.clone());
        }
        m
    }

    fn trim(&self, meta: &Meta, key: Key) -> Meta {
        match (meta, self.hint) {
            (Meta::WriteSet(ws), ReadSetHint::Sig(_) | ReadSetHint::Others(_)) => {
                // One pass over the write set: a long one is tested key by key only once.
                let mut siblings = ws
                    .iter()
                    .copied()
                    .filter(|&k| k != key && self.may_contain(k))
                    .peekable();
                if siblings.peek().is_none() {
                    return Meta::None;
                }
                Meta::Siblings(siblings.collect())
            }
            _ => meta.clone(),
        }
    }
}

/// The hints of a RAMP client's first-round GETs, one per server: what each tells its server about
/// the read set's items on the other servers. Short RAMP-F and RAMP-H read sets send a signature of
/// them (each group's signature is taken once and a server gets the union of the others'); for long
/// ones a saturated signature would let every version's metadata through, so RAMP-F names the items
/// themselves and RAMP-H sends nothing.
pub enum RoundHints {
    /// No hints (other algorithms, second rounds, long RAMP-H read sets).
    None,
    /// The signature of each group's items elsewhere, by group ([`elsewhere_sigs`]).
    Sigs(SmallVec<[u64; 4]>),
    /// Each group's items elsewhere, by group ([`ReadSetHint::Others`]).
    Named(Vec<ReadSetHint>),
}

impl RoundHints {
    /// The hints of a first round by `kind` (none without) of a `read_set`-item read set grouped
    /// by server as `groups`.
    pub fn new<A: PartialEq, T>(
        kind: Option<RampKind>,
        read_set: usize,
        groups: &[(A, Vec<(Key, T)>)],
    ) -> RoundHints {
        match kind {
            Some(RampKind::Fast | RampKind::Hybrid) if read_set <= SMALL_READ_SET => {
                RoundHints::Sigs(elsewhere_sigs(groups))
            }
            Some(RampKind::Fast) => RoundHints::Named(
                groups
                    .iter()
                    .map(|(to, _)| {
                        let elsewhere = groups.iter().filter(|g| g.0 != *to);
                        ReadSetHint::Others(
                            elsewhere.flat_map(|g| g.1.iter().map(|r| r.0)).collect(),
                        )
                    })
                    .collect(),
            ),
            _ => RoundHints::None,
        }
    }

    /// The hint of group `i`.
    pub fn take(&mut self, i: usize) -> ReadSetHint {
        match self {
            RoundHints::None => ReadSetHint::None,
            RoundHints::Sigs(sigs) => ReadSetHint::Sig(sigs[i]),
            RoundHints::Named(hints) => std::mem::replace(&mut hints[i], ReadSetHint::None),
        }
    }
}

/// For keys grouped by server (one group per server), the [`ReadSig`] of each group's keys on the
/// other servers: each group's signature is taken once, and a group's is the union of the others'.
pub fn elsewhere_sigs<A, T>(groups: &[(A, Vec<(Key, T)>)]) -> SmallVec<[u64; 4]> {
    let own: SmallVec<[u64; 4]> = groups
        .iter()
        .map(|g| ReadSig::of(g.1.iter().map(|r| r.0)).0)
        .collect();
    (0..own.len())
        .map(|i| {
            own.iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .fold(0, |sig, (_, s)| sig | s)
        })
        .collect()
}

/// The sibling signatures a writer sends with its PREPAREs, by server group: the [`ReadSig`] of its
/// items on the other servers (0 without metadata, which names no siblings). A reader only ever
/// needs siblings on other servers than the one it reads a version from, and its own items there
/// are what its signature covers, so the two are compared without the keys of either.
pub fn sibling_sigs<A, T>(meta: &Meta, groups: &[(A, Vec<(Key, T)>)]) -> SmallVec<[u64; 4]> {
    match meta {
        Meta::None => groups.iter().map(|_| 0).collect(),
        _ => elsewhere_sigs(groups),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ramp::bloom::Bloom;
    use crate::ramp::msg::{GetMode, ReadResult, Ts};
    use crate::ramp::rounds::{FirstRound, second_round_fast, second_round_hybrid};
    use crate::ramp::server::store::Store;

    const KEYS: u64 = 48;

    /// What a first-round hint to one server stands for, from the read set's items on the other
    /// servers (`elsewhere`), as [`RoundHints`] describes it.
    fn read_set_hint(
        kind: RampKind,
        read_set: usize,
        elsewhere: impl Iterator<Item = Key>,
    ) -> ReadSetHint {
        match kind {
            RampKind::Fast | RampKind::Hybrid if read_set <= SMALL_READ_SET => {
                ReadSetHint::Sig(ReadSig::of(elsewhere).0)
            }
            RampKind::Fast => ReadSetHint::Others(elsewhere.collect()),
            _ => ReadSetHint::None,
        }
    }

    /// What a PREPARE's sibling signature stands for: the signature of the writer's items on the
    /// other servers, 0 without metadata.
    fn sibling_sig_of(meta: &Meta, elsewhere: impl Iterator<Item = Key>) -> u64 {
        match meta {
            Meta::None => 0,
            _ => ReadSig::of(elsewhere).0,
        }
    }

    /// A key, the low ones far more often (so readers race writers on them).
    fn skewed(rng: &mut Rng) -> Key {
        let bound = 1 + rng.below(KEYS);
        rng.below(bound)
    }

    fn server_of(k: Key) -> usize {
        (k % 2) as usize
    }

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Two partition servers' stores under concurrent writers: each write is prepared on its servers
    /// at once, and each server later commits all of the write's versions it holds in one step, at
    /// its own moment (as `PartitionServer::commit_txn` does).
    struct Cluster {
        stores: [Store; 2],
        /// Writes not yet committed on some server: (ts, server, keys there).
        uncommitted: Vec<(Ts, usize, Vec<Key>)>,
        next_ts: Ts,
        meta: fn(&[Key]) -> Meta,
    }

    impl Cluster {
        fn new(meta: fn(&[Key]) -> Meta) -> Cluster {
            Cluster {
                stores: [Store::new(u64::MAX), Store::new(u64::MAX)],
                uncommitted: Vec::new(),
                next_ts: 1,
                meta,
            }
        }

        /// A random step: a new write of 1-4 items, or one server committing one write.
        fn step(&mut self, rng: &mut Rng) {
            if self.uncommitted.is_empty() || rng.below(3) == 0 {
                let ts = self.next_ts;
                self.next_ts += 1;
                let mut keys: Vec<Key> = (0..1 + rng.below(4)).map(|_| skewed(rng)).collect();
                keys.sort_unstable();
                keys.dedup();
                let meta = (self.meta)(&keys);
                for server in 0..2 {
                    let here: Vec<Key> = keys
                        .iter()
                        .copied()
                        .filter(|&k| server_of(k) == server)
                        .collect();
                    let elsewhere = keys.iter().copied().filter(|&k| server_of(k) != server);
                    let sig = sibling_sig_of(&meta, elsewhere);
                    for &k in &here {
                        self.stores[server].prepare(k, ts, vec![1], meta.clone(), sig);
                    }
                    if !here.is_empty() {
                        self.uncommitted.push((ts, server, here));
                    }
                }
            } else {
                let i = rng.below(self.uncommitted.len() as u64) as usize;
                let (ts, server, keys) = self.uncommitted.swap_remove(i);
                for k in keys {
                    self.stores[server].commit(k, ts, 0, 0);
                }
            }
        }

        /// A first-round GET of the read set's items on `server`, answered with full metadata and
        /// as trimmed under the hint the client sends.
        fn get(&self, server: usize, reads: &[Key], kind: RampKind) -> [Vec<FirstRound>; 2] {
            let elsewhere = reads.iter().copied().filter(|&k| server_of(k) != server);
            let hint = read_set_hint(kind, reads.len(), elsewhere);
            let mut filter = ReadSetFilter::new(&hint);
            let first = |r: ReadResult| match r {
                ReadResult::Found { key, ts, meta, .. } => FirstRound { key, ts, meta },
                other => panic!("a lastCommit read is always found: {other:?}"),
            };
            let here = reads.iter().copied().filter(|&k| server_of(k) == server);
            let store = &self.stores[server];
            [
                here.clone().map(|k| first(store.latest(k, true))).collect(),
                here.map(|k| {
                    first(store.latest_as(k, true, |m, sig, ts| filter.siblings(m, sig, k, ts)))
                })
                .collect(),
            ]
        }

        /// The reads after a RAMP-H second round: a fetched version replaces the first round's when
        /// it is newer, as the client takes it.
        fn after_hybrid(&self, first: &[FirstRound]) -> Vec<Ts> {
            let mut ts: Vec<Ts> = first.iter().map(|f| f.ts).collect();
            let (fetch, set) = second_round_hybrid(first);
            for (key, _) in fetch {
                let i = first.iter().position(|f| f.key == key).expect("read item");
                if let ReadResult::Found { ts: got, .. } =
                    self.stores[server_of(key)].in_set(key, &set).0
                {
                    ts[i] = ts[i].max(got);
                }
            }
            ts
        }

        /// The reads after the paper's RAMP-H second round: each item asks for the highest of its
        /// versions among the newer first-round timestamps whose filters may hold it.
        fn after_hybrid_per_item(&self, first: &[FirstRound]) -> Vec<Ts> {
            first
                .iter()
                .map(|vj| {
                    let mut want: Vec<Ts> = first
                        .iter()
                        .filter(|vi| {
                            vi.ts > vj.ts
                                && match &vi.meta {
                                    Meta::Bloom(b) => b.may_contain(vj.key),
                                    Meta::Siblings(s) => s.contains(&vj.key),
                                    _ => false,
                                }
                        })
                        .map(|vi| vi.ts)
                        .collect();
                    want.sort_unstable();
                    want.dedup();
                    match self.stores[server_of(vj.key)].in_set(vj.key, &want).0 {
                        ReadResult::Found { ts, .. } => ts.max(vj.ts),
                        _ => vj.ts,
                    }
                })
                .collect()
        }
    }

    /// Runs readers against a cluster with concurrent writers: each reader's two first-round GETs
    /// happen at different moments. Returns, over every reader, the first rounds with full and with
    /// trimmed metadata.
    fn readers(
        seed: u64,
        kind: RampKind,
        meta: fn(&[Key]) -> Meta,
        mut check: impl FnMut(&Cluster, &[FirstRound], &[FirstRound]),
    ) {
        let mut rng = Rng(seed * 2_654_435_761 + 1);
        let mut cluster = Cluster::new(meta);
        for _ in 0..200 {
            // Every eighth reader reads about three quarters of the items: RAMP-F hints then name its
            // items elsewhere, more than servers scan one by one.
            let mut reads: Vec<Key> = if rng.below(8) == 0 {
                (0..KEYS).filter(|_| rng.below(4) != 0).collect()
            } else {
                (0..2 + rng.below(5)).map(|_| skewed(&mut rng)).collect()
            };
            reads.sort_unstable();
            reads.dedup();
            let (mut full, mut trimmed) = (Vec::new(), Vec::new());
            for server in [rng.below(2) as usize, 0, 1] {
                if full.iter().any(|f: &FirstRound| server_of(f.key) == server) {
                    continue;
                }
                for _ in 0..rng.below(4) {
                    cluster.step(&mut rng);
                }
                let [f, t] = cluster.get(server, &reads, kind);
                full.extend(f);
                trimmed.extend(t);
            }
            check(&cluster, &full, &trimmed);
        }
    }

    #[test]
    fn ramp_fast_second_rounds_are_the_same_with_trimmed_metadata() {
        let (mut races, mut trimmed_away, mut long) = (0, 0, 0);
        for seed in 0..100 {
            readers(
                seed,
                RampKind::Fast,
                |ws| Meta::WriteSet(ws.into()),
                |_, full, trimmed| {
                    let second = second_round_fast(full);
                    assert_eq!(second, second_round_fast(trimmed), "seed {seed}: {full:?}");
                    races += !second.is_empty() as usize;
                    long += (full.len() > 2 * SMALL_READ_SET + 2) as usize;
                    trimmed_away += full
                        .iter()
                        .zip(trimmed)
                        .filter(|(f, t)| f.meta != Meta::None && t.meta == Meta::None)
                        .count();
                },
            );
        }
        assert!(races > 500, "readers racing writers: {races}");
        assert!(
            trimmed_away > 20_000,
            "results needing no metadata: {trimmed_away}"
        );
        assert!(
            long > 1000,
            "read sets whose items elsewhere servers test by bitmap: {long}"
        );
    }

    #[test]
    fn ramp_hybrid_reads_are_the_same_with_trimmed_metadata() {
        // A small filter, for false positives, and the default shape.
        fn small(ws: &[Key]) -> Meta {
            Meta::Bloom(Bloom::of(ws.iter().copied(), 64, 2))
        }
        fn default_shape(ws: &[Key]) -> Meta {
            Meta::Bloom(Bloom::of(
                ws.iter().copied(),
                crate::ramp::bloom::DEFAULT_BITS,
                crate::ramp::bloom::DEFAULT_HASHES,
            ))
        }
        let (races, fetches_saved) = hybrid_readers(small);
        assert!(races > 500, "readers racing writers: {races}");
        assert!(
            fetches_saved > 100,
            "same-server false positives not fetched: {fetches_saved}"
        );
        let (races, _) = hybrid_readers(default_shape);
        assert!(
            races > 500,
            "readers racing writers (default filters): {races}"
        );
    }

    /// Runs RAMP-H readers against writers whose versions carry `bloom` metadata, checking that
    /// trimmed metadata reads the same and fetches nothing more; returns the reads that raced a
    /// write and the second-round fetches trimming saved.
    fn hybrid_readers(bloom: fn(&[Key]) -> Meta) -> (usize, usize) {
        let (mut races, mut fetches_saved) = (0, 0);
        for seed in 0..100 {
            readers(seed, RampKind::Hybrid, bloom, |cluster, full, trimmed| {
                let (second_full, second_trimmed) =
                    (second_round_hybrid(full).0, second_round_hybrid(trimmed).0);
                let asked = |second: &[(Key, GetMode)]| -> Vec<Key> {
                    let mut v: Vec<Key> = second.iter().map(|(k, _)| *k).collect();
                    v.sort_unstable();
                    v
                };
                let (asked_full, asked_trimmed) = (asked(&second_full), asked(&second_trimmed));
                assert!(
                    asked_trimmed.iter().all(|a| asked_full.contains(a)),
                    "seed {seed}: trimmed metadata asks nothing more"
                );
                assert_eq!(
                    cluster.after_hybrid(full),
                    cluster.after_hybrid(trimmed),
                    "seed {seed}: the same reads"
                );
                assert_eq!(
                    cluster.after_hybrid(full),
                    cluster.after_hybrid_per_item(full),
                    "seed {seed}: one shared timestamp set reads what per-item sets read"
                );
                races += !second_full.is_empty() as usize;
                fetches_saved += asked_full.len() - asked_trimmed.len();
            });
        }
        (races, fetches_saved)
    }

    #[test]
    fn a_read_signature_never_misses_an_item_of_the_read_set() {
        let keys: Vec<Key> = (0..40).map(|k| k * 7919).collect();
        let sig = ReadSig::of(keys.iter().copied());
        assert!(keys.iter().all(|&k| sig.may_contain(k)));
        let small = ReadSig::of(keys[..4].iter().copied());
        let outside = (1000..2000u64).filter(|&k| small.may_contain(k)).count();
        assert!(
            outside < 150,
            "a 4-item signature admits few others: {outside}"
        );
    }

    #[test]
    fn round_hints_and_sibling_signatures_cover_each_servers_items_elsewhere() {
        let mut rng = Rng(0x1234_5678);
        for round in 0..400 {
            let servers = 1 + rng.below(4) as usize;
            let read_set = 1 + rng.below(40) as usize;
            let mut groups: Vec<(usize, Vec<(Key, ())>)> = Vec::new();
            for _ in 0..read_set {
                let k = rng.below(1 << 40);
                let to = (k % servers as u64) as usize;
                match groups.iter_mut().find(|g| g.0 == to) {
                    Some(g) => g.1.push((k, ())),
                    None => groups.push((to, vec![(k, ())])),
                }
            }
            let kinds = [RampKind::Fast, RampKind::Hybrid, RampKind::Small];
            for kind in std::iter::once(None).chain(kinds.map(Some)) {
                let mut hints = RoundHints::new(kind, read_set, &groups);
                for (i, (to, _)) in groups.iter().enumerate() {
                    let elsewhere = groups
                        .iter()
                        .filter(|g| g.0 != *to)
                        .flat_map(|g| g.1.iter().map(|r| r.0));
                    let want = match kind {
                        Some(kind) => read_set_hint(kind, read_set, elsewhere),
                        None => ReadSetHint::None,
                    };
                    assert_eq!(hints.take(i), want, "round {round}, {kind:?}, group {i}");
                }
            }
            let keys: Vec<Key> = groups
                .iter()
                .flat_map(|g| g.1.iter().map(|r| r.0))
                .collect();
            for meta in [Meta::None, Meta::WriteSet(keys.as_slice().into())] {
                let sigs = sibling_sigs(&meta, &groups);
                for (i, (to, _)) in groups.iter().enumerate() {
                    let elsewhere = groups
                        .iter()
                        .filter(|g| g.0 != *to)
                        .flat_map(|g| g.1.iter().map(|r| r.0));
                    assert_eq!(sigs[i], sibling_sig_of(&meta, elsewhere), "round {round}");
                }
            }
        }
    }
}
