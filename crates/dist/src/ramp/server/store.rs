//! A partition's multi-version store: versions by timestamp, lastCommit per item, prepared versions,
//! and garbage collection of overwritten versions after a fixed window (paper §4.5).
//!
//! P-DUR's partitions ([`crate::pdur`]) use the same store with their snapshot counter as the
//! timestamp: [`Store::at_or_below`] is Algorithm 4's "most recent version ≤ st", the certification
//! marks ([`Store::marks`]) hold the newest version that wrote and that read each item, and the GC
//! clock is the snapshot counter, so [`Store::collect`] with a window of 0 drops what no snapshot in
//! use can read.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::ramp::msg::{Key, Meta, ReadResult, Ts, Value};

/// How far below the newest committed version of an item (in versions) a commit may still be filed
/// among them; deeper ones go to [`Item::late`]. Concurrent writers commit at most about one
/// version per client in flight out of order, and moving 64 versions is cheap.
const LATE_DEPTH: usize = 64;

/// Whether a version is visible to first-round reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// PREPAREd, its transaction not yet committed here.
    Prepared,
    /// Committed (it may since have been overwritten by a higher one).
    Committed,
}

/// A version. The fields a first-round read tests come first (`repr(C)`), so that a read that finds
/// nothing of its read set in `sibling_sig` never touches the metadata further on.
#[derive(Clone, Debug)]
#[repr(C)]
struct Version {
    ts: Ts,
    ctime: u64,
    /// The writer's sibling signature for this server ([`crate::ramp::hint::sibling_sig`]).
    sibling_sig: u64,
    state: State,
    value: Value,
    meta: Meta,
}

impl Version {
    /// The version order: commit time (E-PCI only; 0 otherwise), then timestamp.
    fn order(&self) -> (u64, Ts) {
        (self.ctime, self.ts)
    }

    fn found(&self, key: Key, with_value: bool) -> ReadResult {
        self.found_as(key, with_value, |m, _, _| m.clone())
    }

    /// The version as a read result whose metadata is `meta` of the stored one, its sibling
    /// signature and its timestamp.
    fn found_as(
        &self,
        key: Key,
        with_value: bool,
        meta: impl FnOnce(&Meta, u64, Ts) -> Meta,
    ) -> ReadResult {
        ReadResult::Found {
            key,
            ts: self.ts,
            ctime: self.ctime,
            value: if with_value {
                self.value.clone()
            } else {
                Vec::new()
            },
            meta: if with_value {
                meta(&self.meta, self.sibling_sig, self.ts)
            } else {
                Meta::None
            },
        }
    }
}

#[derive(Default, Debug)]
#[repr(C)]
struct Item {
    /// lastCommit, the highest committed version, kept apart so first-round reads reach it at once.
    last: Option<Version>,
    /// Committed versions other than lastCommit (below it in version order), in ascending timestamp
    /// order, so lookups are binary searches and the oldest, which GC removes, sit at the front.
    older: VecDeque<Version>,
    /// Committed versions that arrived more than [`LATE_DEPTH`] versions below the newest of `older`
    /// (writes finished by cooperative termination, or long delayed), in ascending timestamp order.
    /// Filing one in `older` would move every version above it: on a hot item that was a megabyte
    /// per write CTP finished.
    late: Vec<Version>,
    /// Versions only prepared here: the writes in flight, in no order. Kept apart from `older` so a
    /// COMMIT moves no other version.
    prepared: Vec<Version>,
    /// The timestamps of `prepared`, position for position: a hot item has many writes in flight,
    /// and a COMMIT looks for its own among 8-byte timestamps rather than whole versions.
    prepared_ts: Vec<Ts>,
    /// The highest timestamp and commit time garbage-collected from this item.
    gc_floor: (u64, Ts),
    /// The highest timestamp ever prepared here, kept when its version is discarded (P-DUR
    /// certification counts every writer that voted commit, whatever its final outcome).
    write_mark: Ts,
    /// The highest timestamp of a reader certified here ([`Store::mark_read`], P-DUR).
    read_mark: Ts,
}

impl Item {
    fn find_prepared(&self, ts: Ts) -> Option<usize> {
        self.prepared_ts.iter().position(|&t| t == ts)
    }

    fn add_prepared(&mut self, v: Version) {
        self.prepared_ts.push(v.ts);
        self.prepared.push(v);
    }

    fn take_prepared(&mut self, i: usize) -> Version {
        self.prepared_ts.swap_remove(i);
        self.prepared.swap_remove(i)
    }

    fn find_late(&self, ts: Ts) -> Option<usize> {
        self.late.binary_search_by_key(&ts, |v| v.ts).ok()
    }

    fn find_older(&self, ts: Ts) -> Option<usize> {
        let at = self.older_position(ts);
        self.older.get(at).is_some_and(|v| v.ts == ts).then_some(at)
    }

    /// Where `ts` is or would go in `older`: the first position whose timestamp is not below it.
    /// Writes in flight are recent, so their timestamps sit among the last versions, though
    /// concurrent writers land some a little below the newest: the search gallops back
    /// from the end (1, 2, 4, ... versions) and bisects only the stretch it stopped in, so it
    /// touches the recently written lines of a hot item's history, not its cold middle.
    fn older_position(&self, ts: Ts) -> usize {
        let len = self.older.len();
        // Invariant: every version at `hi` or above has a timestamp not below `ts`.
        let (mut lo, mut hi, mut step) = (0, len, 1);
        while hi > 0 {
            let at = len.saturating_sub(step);
            if self.older[at].ts < ts {
                lo = at + 1;
                break;
            }
            hi = at;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.older[mid].ts < ts {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn get(&self, ts: Ts) -> Option<&Version> {
        if let Some(v) = &self.last
            && v.ts == ts
        {
            return Some(v);
        }
        if let Some(i) = self.find_prepared(ts) {
            return Some(&self.prepared[i]);
        }
        if let Some(i) = self.find_older(ts) {
            return Some(&self.older[i]);
        }
        self.find_late(ts).map(|i| &self.late[i])
    }

    /// The highest-timestamped version whose timestamp is in `set`; searches only for timestamps
    /// above the best match so far, so a set sorted ascending costs one hit and quick skips.
    fn highest_in(&self, set: &[Ts]) -> Option<&Version> {
        let mut best: Option<&Version> = None;
        for &ts in set.iter().rev() {
            if best.is_some_and(|b| b.ts >= ts) {
                continue;
            }
            if let Some(v) = self.get(ts) {
                best = Some(v);
            }
        }
        best
    }

    /// Files a committed version below lastCommit: in `older` (at the back, unless commits came out
    /// of timestamp order), or in `late` if it lands deeper than [`LATE_DEPTH`].
    fn insert_older(&mut self, v: Version) {
        let at = self.older_position(v.ts);
        if self.older.len() - at <= LATE_DEPTH {
            self.older.insert(at, v);
        } else {
            let at = self.late.partition_point(|l| l.ts < v.ts);
            self.late.insert(at, v);
        }
    }

    /// The committed version with the highest timestamp at most `st`, searched among lastCommit,
    /// `older` and `late` (prepared versions are not committed).
    fn committed_at_or_below(&self, st: Ts) -> Option<&Version> {
        if let Some(v) = &self.last
            && v.ts <= st
        {
            return Some(v);
        }
        let in_older = self.older.partition_point(|v| v.ts <= st);
        let in_late = self.late.partition_point(|v| v.ts <= st);
        let a = in_older.checked_sub(1).map(|i| &self.older[i]);
        let b = in_late.checked_sub(1).map(|i| &self.late[i]);
        match (a, b) {
            (Some(a), Some(b)) => Some(if a.ts >= b.ts { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    fn last_order(&self) -> (u64, Ts) {
        self.last.as_ref().map_or((0, 0), Version::order)
    }

    fn all(&self) -> impl Iterator<Item = &Version> {
        self.last
            .iter()
            .chain(self.older.iter())
            .chain(self.late.iter())
            .chain(self.prepared.iter())
    }
}

fn null(key: Key) -> ReadResult {
    ReadResult::Found {
        key,
        ts: 0,
        ctime: 0,
        value: Vec::new(),
        meta: Meta::None,
    }
}

/// One item as a state transfer carries it (P-DUR, [`Store::for_each_image`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ItemImage {
    /// The item.
    pub key: Key,
    /// Its certification marks ([`Store::marks`]).
    pub write_mark: Ts,
    /// See `write_mark`.
    pub read_mark: Ts,
    /// The highest version no longer held (0 if none).
    pub floor: Ts,
    /// Committed versions held, ascending.
    pub committed: Vec<(Ts, Value)>,
    /// Versions only prepared.
    pub prepared: Vec<(Ts, Value)>,
}

/// A snapshot read asked for a version that garbage collection has removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

/// Counters of a store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Versions held now (prepared, committed and overwritten).
    pub versions: usize,
    /// Versions removed by GC so far.
    pub collected: u64,
}

/// The versions of every item of one server.
pub struct Store {
    /// Boxed so that growing the map moves 16-byte entries, not whole items: resizing it inline
    /// stalled the server for tens of milliseconds (cluster bench p999 17–65 ms at 1,024 clients,
    /// 9–10 ms boxed).
    items: FxHashMap<Key, Box<Item>>,
    overwritten: VecDeque<(u64, Key, Ts)>,
    gc_window: u64,
    newest: Ts,
    stats: StoreStats,
}

impl Store {
    /// An empty store whose overwritten versions live `gc_window` ns.
    pub fn new(gc_window: u64) -> Store {
        Store {
            items: FxHashMap::default(),
            overwritten: VecDeque::new(),
            gc_window,
            newest: 0,
            stats: StoreStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    /// The highest timestamp of any version written here. Write acknowledgements carry it so that
    /// clients that only write move their sequence past it, as reads already make them do: without
    /// it their timestamps drift apart, and their versions land far below a hot item's newest,
    /// where filing one costs a search of cold history and a shift of every version above it.
    pub fn newest(&self) -> Ts {
        self.newest
    }

    /// Number of items ever written.
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// Adds a prepared version with its writer's metadata and sibling signature (a duplicate
    /// PREPARE changes nothing).
    pub fn prepare(&mut self, key: Key, ts: Ts, value: Value, meta: Meta, sibling_sig: u64) {
        let item = self.items.entry(key).or_default();
        if item.get(ts).is_some() {
            return;
        }
        item.write_mark = item.write_mark.max(ts);
        item.add_prepared(Version {
            ts,
            ctime: 0,
            sibling_sig,
            state: State::Prepared,
            value,
            meta,
        });
        self.newest = self.newest.max(ts);
        self.stats.versions += 1;
    }

    /// Commits version `ts` of `key` at commit time `ctime`; lastCommit moves if it is higher.
    /// Returns false if there is no such version.
    pub fn commit(&mut self, key: Key, ts: Ts, ctime: u64, now: u64) -> bool {
        let Some(item) = self.items.get_mut(&key) else {
            return false;
        };
        let Some(i) = item.find_prepared(ts) else {
            return item.get(ts).is_some();
        };
        let mut v = item.take_prepared(i);
        v.state = State::Committed;
        v.ctime = ctime;
        if v.order() > item.last_order() {
            if let Some(old) = item.last.replace(v) {
                self.overwritten.push_back((now, key, old.ts));
                item.insert_older(old);
            }
        } else {
            self.overwritten.push_back((now, key, ts));
            item.insert_older(v);
        }
        true
    }

    /// Installs an already committed version in one step (NWNR and the lock baselines).
    pub fn put(&mut self, key: Key, ts: Ts, value: Value, now: u64) {
        self.prepare(key, ts, value, Meta::None, 0);
        self.commit(key, ts, 0, now);
    }

    /// Installs a committed version above every version the item has (P-DUR's single-partition
    /// commits, whose `SC` only grows): no search for a duplicate or for its place.
    pub fn install_newest(&mut self, key: Key, ts: Ts, value: Value, now: u64) {
        let item = self.items.entry(key).or_default();
        if item.write_mark >= ts {
            // Not above everything (or a repeat): the general path files it.
            self.put(key, ts, value, now);
            return;
        }
        item.write_mark = ts;
        let v = Version {
            ts,
            ctime: 0,
            sibling_sig: 0,
            state: State::Committed,
            value,
            meta: Meta::None,
        };
        if let Some(old) = item.last.replace(v) {
            self.overwritten.push_back((now, key, old.ts));
            if item.older.back().is_none_or(|b| b.ts < old.ts) {
                item.older.push_back(old);
            } else {
                item.insert_older(old);
            }
        }
        self.newest = self.newest.max(ts);
        self.stats.versions += 1;
    }

    /// Removes a prepared version of an aborted transaction.
    pub fn discard(&mut self, key: Key, ts: Ts) {
        if let Some(item) = self.items.get_mut(&key)
            && let Some(i) = item.find_prepared(ts)
        {
            item.take_prepared(i);
            self.stats.versions -= 1;
        }
    }

    /// The version at lastCommit (the null version if none), with value and metadata or the timestamp only.
    pub fn latest(&self, key: Key, with_value: bool) -> ReadResult {
        self.latest_as(key, with_value, |m, _, _| m.clone())
    }

    /// [`Store::latest`], answering `meta` of the version's metadata, its sibling signature and its
    /// timestamp (read without copying the metadata first).
    pub fn latest_as(
        &self,
        key: Key,
        with_value: bool,
        meta: impl FnOnce(&Meta, u64, Ts) -> Meta,
    ) -> ReadResult {
        match self.items.get(&key).and_then(|it| it.last.as_ref()) {
            Some(v) => v.found_as(key, with_value, meta),
            None => null(key),
        }
    }

    /// The version with timestamp `ts`, and whether it is still only prepared here.
    pub fn exact(&self, key: Key, ts: Ts) -> (ReadResult, bool) {
        let item = self.items.get(&key);
        match item.and_then(|it| it.get(ts)) {
            Some(v) => (v.found(key, true), v.state == State::Prepared),
            None if ts == 0 => (null(key), false),
            None if item.is_some_and(|it| ts <= it.gc_floor.1) => (ReadResult::Gone { key }, false),
            None => (ReadResult::Missing { key }, false),
        }
    }

    /// The highest-timestamped version whose timestamp is in `set`, and whether it is only prepared.
    pub fn in_set(&self, key: Key, set: &[Ts]) -> (ReadResult, bool) {
        let item = self.items.get(&key);
        let best = item.and_then(|it| it.highest_in(set));
        // A wanted timestamp above the best match that GC may have removed could be the sibling
        // the reader needs: answering with an older version would fracture the read.
        let above = best.map_or(0, |v| v.ts);
        let maybe_collected =
            item.is_some_and(|it| set.iter().any(|&t| t > above && t <= it.gc_floor.1));
        match best {
            _ if maybe_collected => (ReadResult::Gone { key }, false),
            Some(v) => (v.found(key, true), v.state == State::Prepared),
            None if set.contains(&0) => (null(key), false),
            None => (ReadResult::Missing { key }, false),
        }
    }

    /// E-PCI: the newest committed version whose commit time is at most `read_ts`.
    pub fn at_time(&self, key: Key, read_ts: u64) -> ReadResult {
        let Some(item) = self.items.get(&key) else {
            return null(key);
        };
        let best = item
            .all()
            .filter(|v| v.state == State::Committed && v.ctime <= read_ts)
            .max_by_key(|v| v.order());
        let floor = item.gc_floor;
        match best {
            Some(v) if floor.0 <= read_ts && floor > v.order() => ReadResult::Gone { key },
            Some(v) => v.found(key, true),
            None if floor != (0, 0) => ReadResult::Gone { key },
            None => null(key),
        }
    }

    /// Snapshot read (P-DUR, Algorithm 4 line 5): the committed version of `key` with the highest
    /// timestamp at most `st` and its value, `Ok(None)` if there is none, or `Err(Gone)` when GC
    /// may have removed the version the snapshot should see.
    pub fn at_or_below(&self, key: Key, st: Ts) -> Result<Option<(Ts, &Value)>, Gone> {
        let Some(item) = self.items.get(&key) else {
            return Ok(None);
        };
        let best = item.committed_at_or_below(st);
        let floor = item.gc_floor.1;
        // Below the floor, or a best match older than a collected version at most `st`: the
        // version the snapshot sees may be gone.
        if floor != 0 && (st < floor || best.is_none_or(|v| v.ts < floor)) {
            return Err(Gone);
        }
        Ok(best.map(|v| (v.ts, &v.value)))
    }

    /// The certification marks of `key` (P-DUR): the highest timestamp ever prepared (written by a
    /// transaction that voted commit) and the highest passed to [`Store::mark_read`]; 0 for an item
    /// never seen.
    pub fn marks(&self, key: Key) -> (Ts, Ts) {
        self.items
            .get(&key)
            .map_or((0, 0), |it| (it.write_mark, it.read_mark))
    }

    /// Records that a transaction certified at timestamp `ts` read `key` (P-DUR's stronger test).
    pub fn mark_read(&mut self, key: Key, ts: Ts) {
        let item = self.items.entry(key).or_default();
        item.read_mark = item.read_mark.max(ts);
    }

    /// Calls `f(key, ts, value)` with every item's lastCommit, in no particular order.
    pub fn for_each_latest(&self, mut f: impl FnMut(Key, Ts, &Value)) {
        for (&key, item) in &self.items {
            if let Some(v) = &item.last {
                f(key, v.ts, &v.value);
            }
        }
    }

    /// Timestamps of the versions of `key` that are prepared but not committed here.
    pub fn prepared(&self, key: Key) -> impl Iterator<Item = Ts> + '_ {
        self.items
            .get(&key)
            .into_iter()
            .flat_map(|it| it.prepared.iter())
            .map(|v| v.ts)
    }

    /// Calls `f` with every item's [`ItemImage`] (P-DUR's state transfer), in no particular order.
    /// Of the committed versions it keeps those above `keep_above` and the newest at most
    /// `keep_above` (what a snapshot from `keep_above` on reads); the older ones are left out and
    /// raise the image's floor, so a read below it reports them gone.
    pub fn for_each_image(&self, keep_above: Ts, mut f: impl FnMut(ItemImage)) {
        for (&key, item) in &self.items {
            let mut committed: Vec<(Ts, Value)> = item
                .last
                .iter()
                .chain(item.older.iter())
                .chain(item.late.iter())
                .map(|v| (v.ts, v.value.clone()))
                .collect();
            committed.sort_unstable_by_key(|v| v.0);
            let below = committed.partition_point(|v| v.0 <= keep_above);
            let mut floor = item.gc_floor.1;
            if below > 1 {
                floor = floor.max(committed[below - 2].0);
                committed.drain(..below - 1);
            }
            f(ItemImage {
                key,
                write_mark: item.write_mark,
                read_mark: item.read_mark,
                floor,
                committed,
                prepared: item
                    .prepared
                    .iter()
                    .map(|v| (v.ts, v.value.clone()))
                    .collect(),
            });
        }
    }

    /// Installs an item from its image in place of whatever the store held of it.
    pub fn install_image(&mut self, img: ItemImage) {
        let mut item = Box::new(Item {
            write_mark: img.write_mark,
            read_mark: img.read_mark,
            gc_floor: (0, img.floor),
            ..Item::default()
        });
        let version = |(ts, value): (Ts, Value), state| Version {
            ts,
            ctime: 0,
            sibling_sig: 0,
            state,
            value,
            meta: Meta::None,
        };
        let mut committed = img.committed;
        committed.sort_unstable_by_key(|v| v.0);
        committed.dedup_by_key(|v| v.0);
        let added = committed.len() + img.prepared.len();
        item.last = committed.pop().map(|v| version(v, State::Committed));
        item.older = committed
            .into_iter()
            .map(|v| version(v, State::Committed))
            .collect();
        for v in img.prepared {
            item.add_prepared(version(v, State::Prepared));
        }
        // Each older version is overwritten at the next one's timestamp (P-DUR's GC clock).
        let next = item.older.iter().skip(1).chain(item.last.iter());
        for (v, by) in item.older.iter().zip(next) {
            self.overwritten.push_back((by.ts, img.key, v.ts));
        }
        self.newest = self.newest.max(item.all().map(|v| v.ts).max().unwrap_or(0));
        if let Some(old) = self.items.insert(img.key, item) {
            self.stats.versions -= old.all().count();
        }
        self.stats.versions += added;
    }

    /// Drops versions overwritten more than the GC window ago.
    pub fn collect(&mut self, now: u64) {
        while let Some(&(at, key, ts)) = self.overwritten.front() {
            if at + self.gc_window > now {
                break;
            }
            self.overwritten.pop_front();
            let Some(item) = self.items.get_mut(&key) else {
                continue;
            };
            let removed = match item.find_older(ts) {
                Some(i) => item.older.remove(i),
                None => item.find_late(ts).map(|i| item.late.remove(i)),
            };
            let Some(v) = removed else {
                continue;
            };
            item.gc_floor = item.gc_floor.max(v.order());
            self.stats.versions -= 1;
            self.stats.collected += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts_of(r: &ReadResult) -> Option<Ts> {
        match r {
            ReadResult::Found { ts, .. } => Some(*ts),
            _ => None,
        }
    }

    #[test]
    fn prepared_versions_stay_invisible_until_commit_and_last_commit_only_grows() {
        let mut s = Store::new(100);
        s.prepare(1, 10, vec![1], Meta::None, 0);
        assert_eq!(ts_of(&s.latest(1, true)), Some(0));
        assert!(s.exact(1, 10).1, "prepared only");
        assert!(s.commit(1, 10, 0, 0));
        assert_eq!(ts_of(&s.latest(1, true)), Some(10));
        s.prepare(1, 5, vec![2], Meta::None, 0);
        s.commit(1, 5, 0, 0);
        assert_eq!(
            ts_of(&s.latest(1, true)),
            Some(10),
            "a lower commit never replaces lastCommit"
        );
        assert_eq!(ts_of(&s.exact(1, 5).0), Some(5));
    }

    #[test]
    fn overwritten_versions_are_collected_after_the_window_and_then_reported_gone() {
        let mut s = Store::new(100);
        s.put(1, 10, vec![1], 0);
        s.put(1, 20, vec![2], 50);
        assert_eq!(s.stats().versions, 2);
        s.collect(120);
        assert_eq!(s.stats().versions, 2, "overwritten at 50, kept until 150");
        s.collect(150);
        assert_eq!(s.stats().versions, 1);
        assert_eq!(s.exact(1, 10).0, ReadResult::Gone { key: 1 });
        assert_eq!(s.in_set(1, &[10]).0, ReadResult::Gone { key: 1 });
        assert_eq!(ts_of(&s.latest(1, false)), Some(20));
        assert_eq!(s.exact(1, 30).0, ReadResult::Missing { key: 1 });
    }

    #[test]
    fn in_set_reports_gone_when_a_wanted_newer_version_may_have_been_collected() {
        let mut s = Store::new(100);
        s.put(1, 20, vec![2], 0);
        s.put(1, 30, vec![3], 0);
        s.put(1, 10, vec![1], 60);
        s.collect(100);
        assert_eq!(s.exact(1, 20).0, ReadResult::Gone { key: 1 });
        assert_eq!(
            s.in_set(1, &[10, 20]).0,
            ReadResult::Gone { key: 1 },
            "version 10 is older than the collected sibling the reader asked for"
        );
        assert_eq!(ts_of(&s.in_set(1, &[10]).0), Some(10));
        assert_eq!(ts_of(&s.in_set(1, &[20, 30]).0), Some(30));
    }

    #[test]
    fn in_set_returns_the_highest_match_and_null_for_ts_zero() {
        let mut s = Store::new(100);
        s.put(1, 10, vec![1], 0);
        s.prepare(1, 30, vec![3], Meta::None, 0);
        let (r, prepared) = s.in_set(1, &[10, 30, 40]);
        assert_eq!((ts_of(&r), prepared), (Some(30), true));
        assert_eq!(ts_of(&s.in_set(2, &[0, 7]).0), Some(0));
        assert_eq!(s.in_set(2, &[7]).0, ReadResult::Missing { key: 2 });
    }

    #[test]
    fn prepared_versions_commit_out_of_order_are_discarded_and_collected_apart() {
        let mut s = Store::new(100);
        for ts in [10, 20, 30] {
            s.prepare(1, ts, vec![ts as u8], Meta::None, 0);
        }
        s.prepare(1, 20, vec![99], Meta::None, 0);
        assert_eq!(s.stats().versions, 3, "a duplicate PREPARE adds nothing");
        assert!(s.commit(1, 30, 0, 0));
        assert!(s.commit(1, 10, 0, 5), "a commit below lastCommit");
        assert!(s.commit(1, 10, 0, 5), "a duplicate COMMIT");
        assert!(!s.commit(1, 40, 0, 5), "no such version");
        assert_eq!(s.prepared(1).collect::<Vec<_>>(), [20]);
        assert_eq!(ts_of(&s.latest(1, true)), Some(30));
        let (r, prepared) = s.exact(1, 10);
        assert_eq!(
            (ts_of(&r), prepared),
            (Some(10), false),
            "committed below lastCommit"
        );
        assert!(s.exact(1, 20).1, "still only prepared");
        s.discard(1, 20);
        assert_eq!(s.prepared(1).count(), 0);
        assert_eq!(s.exact(1, 20).0, ReadResult::Missing { key: 1 });
        assert_eq!(ts_of(&s.in_set(1, &[10, 20]).0), Some(10));
        s.collect(105);
        assert_eq!(
            s.stats().versions,
            1,
            "version 10, overwritten at 5, is collected"
        );
        assert_eq!(s.exact(1, 10).0, ReadResult::Gone { key: 1 });
        assert_eq!(ts_of(&s.latest(1, false)), Some(30));
    }

    #[test]
    fn a_commit_far_below_the_newest_versions_is_filed_apart_found_and_collected_like_the_rest() {
        let mut s = Store::new(100);
        s.prepare(1, 5, vec![5], Meta::None, 0);
        let newest = 10 + 2 * LATE_DEPTH as u64;
        for ts in 10..=newest {
            s.put(1, ts, vec![1], 0);
        }
        assert!(s.commit(1, 5, 0, 50), "finished late, as by CTP");
        assert_eq!(s.items[&1].late.len(), 1, "filed apart from the others");
        assert_eq!((ts_of(&s.exact(1, 5).0), s.exact(1, 5).1), (Some(5), false));
        assert_eq!(ts_of(&s.in_set(1, &[5, 7]).0), Some(5));
        assert_eq!(ts_of(&s.in_set(1, &[5, 11]).0), Some(11));
        assert_eq!(ts_of(&s.latest(1, false)), Some(newest));
        assert!(s.commit(1, 5, 0, 60), "a duplicate COMMIT finds it");
        s.collect(120);
        assert_eq!(ts_of(&s.exact(1, 5).0), Some(5), "overwritten at 50");
        assert_eq!(s.exact(1, 11).0, ReadResult::Gone { key: 1 });
        s.collect(150);
        assert_eq!(s.exact(1, 5).0, ReadResult::Gone { key: 1 });
        assert!(s.items[&1].late.is_empty());
        assert_eq!(s.stats().versions, 1);
    }

    #[test]
    fn snapshot_reads_see_the_newest_committed_version_at_or_below_and_marks_remember_writers() {
        let mut s = Store::new(0);
        s.put(1, 1, vec![1], 1);
        s.prepare(1, 2, vec![2], Meta::None, 0);
        s.install_newest(1, 3, vec![3], 3);
        assert_eq!(
            s.at_or_below(1, 2).unwrap(),
            Some((1, &vec![1])),
            "2 is only prepared"
        );
        assert!(s.commit(1, 2, 0, 3));
        assert_eq!(s.at_or_below(1, 2).unwrap(), Some((2, &vec![2])));
        assert_eq!(s.at_or_below(1, 9).unwrap(), Some((3, &vec![3])));
        assert_eq!(s.at_or_below(1, 0).unwrap(), None);
        s.prepare(1, 4, vec![4], Meta::None, 0);
        s.discard(1, 4);
        s.mark_read(1, 3);
        assert_eq!(s.marks(1), (4, 3), "a discarded writer still counts");
        s.collect(3);
        assert_eq!(s.at_or_below(1, 1), Err(Gone), "collected below snapshot 3");
        assert_eq!(s.at_or_below(1, 3).unwrap(), Some((3, &vec![3])));
        assert_eq!(s.stats().versions, 1);
    }

    #[test]
    fn the_galloping_search_finds_the_position_a_binary_search_does() {
        for len in 0..70u64 {
            let mut item = Item::default();
            for i in 0..len {
                let ts = 10 * i + 10;
                item.older.push_back(Version {
                    ts,
                    ctime: 0,
                    sibling_sig: 0,
                    state: State::Committed,
                    value: Vec::new(),
                    meta: Meta::None,
                });
            }
            for ts in 0..10 * len + 20 {
                let want = item.older.partition_point(|v| v.ts < ts);
                assert_eq!(item.older_position(ts), want, "{len} versions, ts {ts}");
            }
        }
    }

    #[test]
    fn lookups_agree_with_a_plain_list_of_versions() {
        let mut s = Store::new(u64::MAX);
        let mut model: Vec<(Ts, bool)> = Vec::new();
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..600u64 {
            let ts = 1 + next() % 400;
            if next() % 3 == 0 {
                if let Some(m) = model.iter_mut().find(|m| m.0 == ts) {
                    s.commit(7, ts, 0, step);
                    m.1 = true;
                }
            } else if !model.iter().any(|m| m.0 == ts) {
                s.prepare(7, ts, vec![1], Meta::None, 0);
                model.push((ts, false));
            }
            let last = model.iter().filter(|m| m.1).map(|m| m.0).max().unwrap_or(0);
            assert_eq!(ts_of(&s.latest(7, false)), Some(last), "step {step}");
            let probe = 1 + next() % 400;
            let (r, prepared) = s.exact(7, probe);
            match model.iter().find(|m| m.0 == probe) {
                Some(m) => assert_eq!((ts_of(&r), prepared), (Some(probe), !m.1)),
                None => assert_eq!(r, ReadResult::Missing { key: 7 }),
            }
            let set: Vec<Ts> = (0..5).map(|_| 1 + next() % 400).collect();
            let want = model.iter().map(|m| m.0).filter(|t| set.contains(t)).max();
            assert_eq!(ts_of(&s.in_set(7, &set).0), want, "set {set:?}");
        }
    }
}
