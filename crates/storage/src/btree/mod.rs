//! A B+-tree from 64-bit keys to word values with optimistic lock coupling (Leis et al., "Optimistic
//! Lock Coupling: A Scalable and Efficient General-Purpose Synchronization Method", 2019): readers
//! take no lock and write nothing, validating each node's version after reading it; writers lock
//! only the nodes they change, never wait for a lock (a busy node restarts the operation), and split
//! full inner nodes on the way down, so a split always finds room in its parent.
//!
//! Removals that empty a leaf unlink it, with the inner nodes left childless above it, so a table
//! whose keys slide (inserted at one end, deleted at the other, as TPC-C's new orders) keeps no
//! trail of empty nodes for scans to walk. Range scans go a leaf at a time and find the next leaf
//! from the root again, by the upper bound of the leaf they read; no leaf links to keep consistent.
//!
//! Unlinked nodes are freed through the caller's epoch guard, once no reader can hold them.

mod node;
pub(crate) mod version;

use crossbeam_epoch::Guard;

use crate::sync::{AtomicPtr, Ordering};
use node::{Header, Inner, Leaf};
use version::{Locked, Restart};

/// A concurrent ordered map from `u64` keys to `usize` values, with leaves of `L` entries and inner
/// nodes of `N` children.
pub struct BTree<const L: usize, const N: usize> {
    root: AtomicPtr<Header>,
}

// SAFETY: nodes are made of atomics and shared by design; they are freed only through epoch guards.
unsafe impl<const L: usize, const N: usize> Send for BTree<L, N> {}
unsafe impl<const L: usize, const N: usize> Sync for BTree<L, N> {}

/// Depth the tree never reaches: growing a level takes a full root, so at least `(N / 2)^depth`
/// inserts, even though removals may leave sparse nodes.
const MAX_DEPTH: usize = 40;

/// An inner node on the way down, its version when read, and the position of the child taken.
#[derive(Clone, Copy)]
struct Step {
    node: *mut Header,
    version: u64,
    pos: usize,
}

/// The inner nodes from the root down to a leaf.
struct Path {
    steps: [Step; MAX_DEPTH],
    depth: usize,
    leaf: *mut Header,
    version: u64,
    /// As in [`Reached::upper`].
    upper: Option<u64>,
}

/// The leaf a descent reached, with its parent (if the root is not a leaf).
struct Reached<'t, const L: usize, const N: usize> {
    leaf: &'t Leaf<L>,
    version: u64,
    parent: Option<(&'t Inner<N>, u64)>,
    /// The smallest separator above the leaf's range: every key of the leaf is at most this.
    upper: Option<u64>,
}

impl<const L: usize, const N: usize> Reached<'_, L, N> {
    /// Whether the leaf and its parent are unchanged since they were read.
    #[inline]
    fn check(&self) -> Result<(), Restart> {
        self.leaf.h.lock.check(self.version)?;
        self.check_parent()
    }

    #[inline]
    fn check_parent(&self) -> Result<(), Restart> {
        match self.parent {
            Some((p, v)) => p.h.lock.check(v),
            None => Ok(()),
        }
    }
}

impl<const L: usize, const N: usize> Default for BTree<L, N> {
    fn default() -> Self {
        const { assert!(L >= 2 && N >= 3, "nodes too small to split") };
        let root = Box::into_raw(Leaf::<L>::new()) as *mut Header;
        BTree {
            root: AtomicPtr::new(root),
        }
    }
}

impl<const L: usize, const N: usize> BTree<L, N> {
    /// Bytes of one leaf.
    pub(crate) const LEAF_BYTES: usize = std::mem::size_of::<Leaf<L>>();
    /// Bytes of one inner node.
    pub(crate) const INNER_BYTES: usize = std::mem::size_of::<Inner<N>>();

    /// Adds `key -> value` unless `key` is present; returns whether it added.
    pub fn insert(&self, key: u64, value: usize, guard: &Guard) -> bool {
        self.upsert_with(key, guard, |current| match current {
            Some(_) => (None, false),
            None => (Some(value), true),
        })
    }

    /// Runs `f` with exclusive insert and remove rights over `key` (its leaf locked): `f` receives
    /// the current value and may return a value to insert when there was none. Returns what `f`
    /// returned.
    pub fn upsert_with<R>(
        &self,
        key: u64,
        _guard: &Guard,
        f: impl FnOnce(Option<usize>) -> (Option<usize>, R),
    ) -> R {
        let mut f = Some(f);
        retry(|| self.try_upsert(key, &mut f))
    }

    /// Removes `key` if it maps to `value`; returns whether it removed.
    pub fn remove(&self, key: u64, value: usize, guard: &Guard) -> bool {
        self.remove_if(key, value, guard, || true, || ())
    }

    /// Removes `key` if it maps to `value` and `decide()` (run with the key's leaf locked, while the
    /// entry is known to be there) agrees; `also` runs under the same lock after the removal.
    /// Returns whether it removed.
    pub fn remove_if(
        &self,
        key: u64,
        value: usize,
        guard: &Guard,
        decide: impl FnOnce() -> bool,
        also: impl FnOnce(),
    ) -> bool {
        let mut then = Some((decide, also));
        let (removed, emptied) = retry(|| self.try_remove(key, value, &mut then));
        if emptied {
            retry(|| self.try_unlink_empty(key, guard));
        }
        removed
    }

    /// The value of `key`, if present.
    #[inline]
    pub fn get(&self, key: u64, _guard: &Guard) -> Option<usize> {
        retry(|| {
            let r = self.descend(key, false)?;
            let n = r.leaf.count();
            let pos = r.leaf.lower_bound(n, key);
            let found = (pos < n && r.leaf.key(pos) == key).then(|| r.leaf.value(pos));
            r.check()?;
            Ok(found)
        })
    }

    /// Starts loading into the cache the leaf whose range holds `key`, where an insert of `key` will
    /// go, so that its cache misses overlap other work: descends the inner nodes and prefetches the
    /// leaf without waiting for it. Changes nothing; gives up if the path is being written.
    #[inline]
    pub fn prefetch(&self, key: u64, _guard: &Guard) {
        let _ = self.try_prefetch(key);
    }

    #[inline]
    fn try_prefetch(&self, key: u64) -> Result<(), Restart> {
        let mut node = self.root.load(Ordering::Acquire);
        loop {
            // SAFETY: reached from the root through nodes whose versions were confirmed after their
            // child was read; the caller's guard keeps them alive.
            let h = unsafe { &*node };
            if h.is_leaf() {
                Leaf::<L>::prefetch(node);
                return Ok(());
            }
            let version = h.lock.read()?;
            // SAFETY: the header says it is an inner node.
            let inner = unsafe { Inner::<N>::of(node) };
            let n = inner.count();
            let child = inner.child(inner.child_pos(n, key));
            inner.h.lock.check(version)?;
            if h.level() == 1 {
                Leaf::<L>::prefetch(child);
                return Ok(());
            }
            node = child;
        }
    }

    /// Calls `f(key, value)` on the entries with keys in `lo..=hi` in ascending order until it
    /// returns false. Each leaf's entries are read at one instant: an entry present throughout the
    /// scan is visited once, one inserted or removed meanwhile may or may not be.
    pub fn scan(&self, lo: u64, hi: u64, _guard: &Guard, mut f: impl FnMut(u64, usize) -> bool) {
        let mut buf = [(0u64, 0usize); L];
        let mut start = lo;
        while start <= hi {
            let (n, next) = retry(|| self.try_read_leaf(start, hi, &mut buf));
            for &(k, v) in &buf[..n] {
                if !f(k, v) {
                    return;
                }
            }
            match next {
                Some(next) => start = next,
                None => return,
            }
        }
    }

    /// The leaf whose range holds `key`, read with lock coupling: each node's version is taken
    /// before its parent's is checked, so the path was a path of the tree at one instant. Inner nodes
    /// found full are split first when `split_full`, and the descent restarts.
    #[inline]
    fn descend(&self, key: u64, split_full: bool) -> Result<Reached<'_, L, N>, Restart> {
        let mut node = self.root.load(Ordering::Acquire);
        // SAFETY: nodes reachable from the root are freed only through epoch guards, and every
        // caller holds one.
        let mut version = unsafe { &*node }.lock.read()?;
        if self.root.load(Ordering::Acquire) != node {
            return Err(Restart);
        }
        let mut parent: Option<(&Inner<N>, u64)> = None;
        let mut upper = None;
        // SAFETY: as above, for every node the loop reaches.
        while !unsafe { &*node }.is_leaf() {
            // SAFETY: the header says it is an inner node.
            let inner = unsafe { Inner::<N>::of(node) };
            if split_full && inner.full() {
                self.split_inner(inner, version, parent)?;
                return Err(Restart);
            }
            if let Some((p, pv)) = parent {
                p.h.lock.check(pv)?;
            }
            let n = inner.count();
            let pos = inner.child_pos(n, key);
            if pos < n {
                upper = Some(inner.key(pos));
            }
            let child = inner.child(pos);
            inner.h.lock.check(version)?;
            parent = Some((inner, version));
            node = child;
            // SAFETY: read from a node whose version was then confirmed.
            version = unsafe { &*node }.lock.read()?;
        }
        // SAFETY: the header says it is a leaf.
        let leaf = unsafe { Leaf::<L>::of(node) };
        Ok(Reached {
            leaf,
            version,
            parent,
            upper,
        })
    }

    fn try_upsert<R>(
        &self,
        key: u64,
        f: &mut Option<impl FnOnce(Option<usize>) -> (Option<usize>, R)>,
    ) -> Result<R, Restart> {
        let r = self.descend(key, true)?;
        let n = r.leaf.count();
        let pos = r.leaf.lower_bound(n, key);
        let found = pos < n && r.leaf.key(pos) == key;
        if !found && n == L {
            self.split_leaf(&r, key)?;
            return Err(Restart);
        }
        let _locked = Locked::upgrade(&r.leaf.h.lock, r.version)?;
        r.check_parent()?;
        // Locked at the version read: `n`, `pos` and `found` still hold. From here on there is no
        // restart, so `f` runs once.
        let f = f.take().expect("runs once");
        let (insert, out) = f(found.then(|| r.leaf.value(pos)));
        if let Some(value) = insert {
            debug_assert!(!found, "upsert_with inserts only a missing key");
            r.leaf.insert_at(pos, n, key, value);
        }
        Ok(out)
    }

    /// Removes the entry if it is there and the caller agrees; also says whether that emptied its
    /// leaf.
    fn try_remove(
        &self,
        key: u64,
        value: usize,
        then: &mut Option<(impl FnOnce() -> bool, impl FnOnce())>,
    ) -> Result<(bool, bool), Restart> {
        let r = self.descend(key, false)?;
        let n = r.leaf.count();
        let pos = r.leaf.lower_bound(n, key);
        if pos == n || r.leaf.key(pos) != key || r.leaf.value(pos) != value {
            r.check()?;
            return Ok((false, false));
        }
        let _locked = Locked::upgrade(&r.leaf.h.lock, r.version)?;
        r.check_parent()?;
        let (decide, also) = then.take().expect("runs once");
        if !decide() {
            return Ok((false, false));
        }
        r.leaf.remove_at(pos, n);
        also();
        Ok((true, n == 1))
    }

    /// Reads into `buf` the entries in `start..=hi` of the leaf whose range holds `start`, and
    /// says where the next leaf's range begins (`None` past `hi` or at the last leaf). Entries above
    /// the leaf's upper bound as read (put there after a neighbour's range was merged in) are left
    /// to the next leaf's read, so no entry is visited twice.
    fn try_read_leaf(
        &self,
        start: u64,
        hi: u64,
        buf: &mut [(u64, usize); L],
    ) -> Result<(usize, Option<u64>), Restart> {
        let r = self.descend(start, false)?;
        let last = r.upper.map_or(hi, |u| u.min(hi));
        let n = r.leaf.count();
        let mut pos = r.leaf.lower_bound(n, start);
        let mut got = 0;
        while pos < n {
            let k = r.leaf.key(pos);
            if k > last {
                break;
            }
            buf[got] = (k, r.leaf.value(pos));
            got += 1;
            pos += 1;
        }
        r.check()?;
        let next = match r.upper {
            Some(u) if u < hi => Some(u + 1),
            _ => None,
        };
        Ok((got, next))
    }

    /// Splits the full leaf `r` reached, before inserting `key`.
    fn split_leaf(&self, r: &Reached<'_, L, N>, key: u64) -> Result<(), Restart> {
        let node = &r.leaf.h as *const Header as *mut Header;
        self.lock_for_split(&r.leaf.h, node, r.version, r.parent)?;
        let (sep, right) = r.leaf.split(key);
        self.link_split(0, node, sep, Box::into_raw(right) as *mut Header, r.parent);
        r.leaf.h.lock.unlock(r.version);
        if let Some((p, pv)) = r.parent {
            p.h.lock.unlock(pv);
        }
        Ok(())
    }

    /// Splits the full inner node `inner` met on the way down.
    fn split_inner(
        &self,
        inner: &Inner<N>,
        version: u64,
        parent: Option<(&Inner<N>, u64)>,
    ) -> Result<(), Restart> {
        let node = &inner.h as *const Header as *mut Header;
        self.lock_for_split(&inner.h, node, version, parent)?;
        let (sep, right) = inner.split();
        let level = inner.h.level();
        self.link_split(
            level,
            node,
            sep,
            Box::into_raw(right) as *mut Header,
            parent,
        );
        inner.h.lock.unlock(version);
        if let Some((p, pv)) = parent {
            p.h.lock.unlock(pv);
        }
        Ok(())
    }

    /// Locks a node to split and its parent (parent first), both at the versions read on the way
    /// down; without a parent, the node must still be the root.
    fn lock_for_split(
        &self,
        h: &Header,
        node: *mut Header,
        version: u64,
        parent: Option<(&Inner<N>, u64)>,
    ) -> Result<(), Restart> {
        if let Some((p, pv)) = parent {
            p.h.lock.upgrade(pv)?;
        }
        let unlock_parent = || {
            if let Some((p, pv)) = parent {
                p.h.lock.unlock(pv);
            }
        };
        if let Err(e) = h.lock.upgrade(version) {
            unlock_parent();
            return Err(e);
        }
        if parent.is_none() && self.root.load(Ordering::Relaxed) != node {
            h.lock.unlock(version);
            return Err(Restart);
        }
        Ok(())
    }

    /// Links `right`, split off `left` (both of height `level`), into the parent, or under a new
    /// root.
    fn link_split(
        &self,
        level: u8,
        left: *mut Header,
        sep: u64,
        right: *mut Header,
        parent: Option<(&Inner<N>, u64)>,
    ) {
        match parent {
            Some((p, _)) => p.insert_child(sep, right),
            None => {
                let root = Inner::<N>::root(level, sep, left, right);
                self.root
                    .store(Box::into_raw(root) as *mut Header, Ordering::Release);
            }
        }
    }

    /// The path to the leaf whose range holds `key`, read with lock coupling as in [`Self::descend`].
    fn descend_path(&self, key: u64) -> Result<Path, Restart> {
        let mut p = Path {
            steps: [Step {
                node: std::ptr::null_mut(),
                version: 0,
                pos: 0,
            }; MAX_DEPTH],
            depth: 0,
            leaf: self.root.load(Ordering::Acquire),
            version: 0,
            upper: None,
        };
        // SAFETY: as in `descend`.
        p.version = unsafe { &*p.leaf }.lock.read()?;
        if self.root.load(Ordering::Acquire) != p.leaf {
            return Err(Restart);
        }
        // SAFETY: as in `descend`.
        while !unsafe { &*p.leaf }.is_leaf() {
            // SAFETY: the header says it is an inner node.
            let inner = unsafe { Inner::<N>::of(p.leaf) };
            let n = inner.count();
            let pos = inner.child_pos(n, key);
            if pos < n {
                p.upper = Some(inner.key(pos));
            }
            let child = inner.child(pos);
            inner.h.lock.check(p.version)?;
            assert!(
                p.depth < MAX_DEPTH,
                "B+-tree deeper than {MAX_DEPTH} levels"
            );
            p.steps[p.depth] = Step {
                node: p.leaf,
                version: p.version,
                pos,
            };
            p.depth += 1;
            p.leaf = child;
            // SAFETY: read from a node whose version was then confirmed.
            p.version = unsafe { &*child }.lock.read()?;
            inner.h.lock.check(p.steps[p.depth - 1].version)?;
        }
        Ok(p)
    }

    /// Number of entries (a scan of the whole tree).
    pub fn len(&self, guard: &Guard) -> usize {
        let mut n = 0;
        self.scan(0, u64::MAX, guard, |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self, guard: &Guard) -> bool {
        let mut empty = true;
        self.scan(0, u64::MAX, guard, |_, _| {
            empty = false;
            false
        });
        empty
    }

    /// Bytes held by the tree's nodes, counted on a walk of its leaves in key order (exact when no
    /// writer runs meanwhile): the inner nodes of each level are counted as the walk's path through
    /// that level changes.
    pub fn memory_bytes(&self, _guard: &Guard) -> usize {
        let mut last = [std::ptr::null_mut(); MAX_DEPTH];
        let (mut leaves, mut inner) = (0, 0);
        let mut start = 0u64;
        loop {
            let p = retry(|| self.descend_path(start));
            leaves += 1;
            for (seen, step) in last.iter_mut().zip(&p.steps[..p.depth]) {
                if *seen != step.node {
                    *seen = step.node;
                    inner += 1;
                }
            }
            match p.upper {
                Some(u) if u < u64::MAX => start = u + 1,
                _ => break,
            }
        }
        leaves * Self::LEAF_BYTES + inner * Self::INNER_BYTES
    }

    /// Unlinks the leaf whose range holds `key` if it is empty, with the chain of inner nodes above
    /// it that would be left without children, from the nearest ancestor that keeps others. The
    /// nodes on that path are locked top-down at the versions read on the way down, so the path is
    /// unchanged when it is cut. A tree that is only this path keeps it.
    fn try_unlink_empty(&self, key: u64, guard: &Guard) -> Result<(), Restart> {
        let p = self.descend_path(key)?;
        let (path, depth, node, version) = (&p.steps, p.depth, p.leaf, p.version);
        // SAFETY: the header says it is a leaf.
        let leaf = unsafe { Leaf::<L>::of(node) };
        if leaf.count() != 0 {
            // Refilled meanwhile.
            return leaf.h.lock.check(version);
        }
        // The nearest ancestor with another child. Counts read here are confirmed by locking at the
        // versions read on the way down.
        // SAFETY: path nodes are inner nodes, kept alive by the guard.
        let Some(top) = (0..depth)
            .rev()
            .find(|&i| unsafe { Inner::<N>::of(path[i].node) }.count() > 0)
        else {
            return Ok(());
        };
        let cut = &path[top..depth];
        for (i, s) in cut.iter().enumerate() {
            // SAFETY: as above.
            if let Err(e) = unsafe { &*s.node }.lock.upgrade(s.version) {
                unlock_all(&cut[..i]);
                return Err(e);
            }
        }
        if let Err(e) = leaf.h.lock.upgrade(version) {
            unlock_all(cut);
            return Err(e);
        }
        // SAFETY: locked above; an inner node.
        unsafe { Inner::<N>::of(cut[0].node) }.remove_child(cut[0].pos);
        for s in &cut[1..] {
            // SAFETY: locked above, unlinked now; readers that still hold it restart on seeing it
            // obsolete, and it is freed once their guards are gone.
            unsafe {
                (*s.node).lock.unlock_obsolete(s.version);
                retire::<N>(s.node, guard, false);
            }
        }
        leaf.h.lock.unlock_obsolete(version);
        // SAFETY: as above, for the leaf.
        unsafe { retire::<L>(node, guard, true) };
        // SAFETY: locked above.
        unsafe { &*cut[0].node }.lock.unlock(cut[0].version);
        Ok(())
    }
}

/// Frees an unlinked node once no guard pinned before now remains.
///
/// # Safety
/// `node` heads a `Leaf<C>` (if `leaf`) or an `Inner<C>`, allocated by `Box`, now unreachable.
unsafe fn retire<const C: usize>(node: *mut Header, guard: &Guard, leaf: bool) {
    let addr = node as usize;
    // SAFETY: per the contract; the closure runs once, after every reader that could see it.
    unsafe {
        guard.defer_unchecked(move || {
            if leaf {
                drop(Box::from_raw(addr as *mut Leaf<C>));
            } else {
                drop(Box::from_raw(addr as *mut Inner<C>));
            }
        })
    };
}

/// Unlocks the locked inner nodes of `steps`, unchanged.
fn unlock_all(steps: &[Step]) {
    for s in steps {
        // SAFETY: locked by the caller, alive under its guard.
        unsafe { &*s.node }.lock.unlock(s.version);
    }
}

/// Runs an optimistic operation until it does not have to restart, backing off while it does.
#[inline]
fn retry<T>(mut op: impl FnMut() -> Result<T, Restart>) -> T {
    let mut restarts = 0u32;
    loop {
        match op() {
            Ok(v) => return v,
            Err(Restart) => {
                restarts += 1;
                if restarts < 16 {
                    std::hint::spin_loop();
                } else {
                    crate::sync::yield_now();
                }
            }
        }
    }
}

impl<const L: usize, const N: usize> Drop for BTree<L, N> {
    fn drop(&mut self) {
        let mut stack = vec![self.root.load(Ordering::Relaxed)];
        while let Some(node) = stack.pop() {
            // SAFETY: the tree is owned exclusively; every reachable node is live and was allocated by
            // `Box` as the kind its header says.
            unsafe {
                if (*node).is_leaf() {
                    drop(Box::from_raw(node as *mut Leaf<L>));
                } else {
                    let inner = Inner::<N>::of(node);
                    stack.extend((0..=inner.count()).map(|i| inner.child(i)));
                    drop(Box::from_raw(node as *mut Inner<N>));
                }
            }
        }
    }
}
