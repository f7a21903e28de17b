//! B+-tree nodes. Every field is an atomic, since readers read nodes while writers change them (and
//! discard what they read when the version moved); writers change a node only under its lock, or
//! before it is linked into the tree.

use super::version::VersionLock;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// What both kinds of node begin with.
#[repr(C)]
pub(super) struct Header {
    pub(super) lock: VersionLock,
    /// Keys held: entries of a leaf, separators of an inner node (which has one more child).
    count: AtomicU32,
    /// Height above the leaves: 0 for a leaf, 1 for an inner node whose children are leaves.
    level: u8,
}

impl Header {
    /// The header of a new, empty node.
    fn new(level: u8) -> Header {
        Header {
            lock: VersionLock::new(),
            count: AtomicU32::new(0),
            level,
        }
    }

    #[inline]
    pub(super) fn is_leaf(&self) -> bool {
        self.level == 0
    }

    #[inline]
    pub(super) fn level(&self) -> u8 {
        self.level
    }

    /// The number of keys, as far as a reader can trust it (never above the capacity `cap`).
    #[inline]
    pub(super) fn count(&self, cap: usize) -> usize {
        // Acquire: the slots filled before a count was published are seen with it.
        (self.count.load(Ordering::Acquire) as usize).min(cap)
    }

    #[inline]
    fn set_count(&self, n: usize) {
        self.count.store(n as u32, Ordering::Release);
    }
}

/// A leaf: up to `L` entries in key order.
#[repr(C)]
pub(super) struct Leaf<const L: usize> {
    pub(super) h: Header,
    keys: [AtomicU64; L],
    values: [AtomicUsize; L],
}

/// An inner node: `count` separators and `count + 1` children, at most `N` children. Child `i` holds
/// the keys above separator `i - 1` and up to separator `i`.
#[repr(C)]
pub(super) struct Inner<const N: usize> {
    pub(super) h: Header,
    keys: [AtomicU64; N],
    children: [AtomicPtr<Header>; N],
}

/// The first position in `keys[..n]` whose key is at least `key` (`n` if none).
#[inline]
fn lower_bound(keys: &[AtomicU64], n: usize, key: u64) -> usize {
    let (mut lo, mut len) = (0, n);
    while len > 0 {
        let half = len / 2;
        if keys[lo + half].load(Ordering::Relaxed) < key {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    lo
}

/// Moves `slots[from..to]` one place up (the caller made sure `slots[to]` exists).
#[inline]
fn shift_up<T: Slot>(slots: &[T], from: usize, to: usize) {
    for i in (from..to).rev() {
        slots[i + 1].put(slots[i].take());
    }
}

/// Moves `slots[from + 1..to]` one place down, over `slots[from]`.
#[inline]
fn shift_down<T: Slot>(slots: &[T], from: usize, to: usize) {
    for i in from + 1..to {
        slots[i - 1].put(slots[i].take());
    }
}

/// An atomic slot moved by a writer (relaxed: the version lock orders what readers see).
trait Slot {
    type V: Copy;
    fn take(&self) -> Self::V;
    fn put(&self, v: Self::V);
}

impl Slot for AtomicU64 {
    type V = u64;
    #[inline]
    fn take(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
    #[inline]
    fn put(&self, v: u64) {
        self.store(v, Ordering::Relaxed)
    }
}

impl Slot for AtomicUsize {
    type V = usize;
    #[inline]
    fn take(&self) -> usize {
        self.load(Ordering::Relaxed)
    }
    #[inline]
    fn put(&self, v: usize) {
        self.store(v, Ordering::Relaxed)
    }
}

impl Slot for AtomicPtr<Header> {
    type V = *mut Header;
    #[inline]
    fn take(&self) -> *mut Header {
        self.load(Ordering::Relaxed)
    }
    #[inline]
    fn put(&self, v: *mut Header) {
        self.store(v, Ordering::Relaxed)
    }
}

/// An array of atomics, all zero.
fn zeros<A, const C: usize>(zero: fn() -> A) -> [A; C] {
    std::array::from_fn(|_| zero())
}

impl<const L: usize> Leaf<L> {
    /// A new empty leaf.
    pub(super) fn new() -> Box<Leaf<L>> {
        Box::new(Leaf {
            h: Header::new(0),
            keys: zeros(|| AtomicU64::new(0)),
            values: zeros(|| AtomicUsize::new(0)),
        })
    }

    /// The leaf of a header of level 0.
    ///
    /// # Safety
    /// `h` heads a live `Leaf<L>`.
    #[inline]
    pub(super) unsafe fn of<'a>(h: *const Header) -> &'a Leaf<L> {
        // SAFETY: the header is the first field of a `repr(C)` leaf.
        unsafe { &*(h as *const Leaf<L>) }
    }

    #[inline]
    pub(super) fn count(&self) -> usize {
        self.h.count(L)
    }

    /// The position of the first entry at least `key`, among the first `n`.
    #[inline]
    pub(super) fn lower_bound(&self, n: usize, key: u64) -> usize {
        lower_bound(&self.keys, n, key)
    }

    #[inline]
    pub(super) fn key(&self, i: usize) -> u64 {
        self.keys[i].load(Ordering::Relaxed)
    }

    #[inline]
    pub(super) fn value(&self, i: usize) -> usize {
        self.values[i].load(Ordering::Relaxed)
    }

    /// Starts loading the whole leaf headed by `h` into the cache, without reading it.
    #[inline]
    pub(super) fn prefetch(h: *const Header) {
        let start = h as usize;
        for line in (start & !63..start + std::mem::size_of::<Leaf<L>>()).step_by(64) {
            crate::prefetch::line(line as *const u8);
        }
    }

    /// Inserts an entry at position `pos` of `n` (the leaf is locked and not full).
    pub(super) fn insert_at(&self, pos: usize, n: usize, key: u64, value: usize) {
        shift_up(&self.keys, pos, n);
        shift_up(&self.values, pos, n);
        self.keys[pos].put(key);
        self.values[pos].put(value);
        self.h.set_count(n + 1);
    }

    /// Removes the entry at position `pos` of `n` (the leaf is locked).
    pub(super) fn remove_at(&self, pos: usize, n: usize) {
        shift_down(&self.keys, pos, n);
        shift_down(&self.values, pos, n);
        self.h.set_count(n - 1);
    }

    /// Splits the full, locked leaf before inserting `key`: the upper entries go to a new leaf,
    /// returned with the separator (the largest key left here). A key beyond every entry (an
    /// ascending run of inserts) leaves this leaf full and starts an empty one, so such runs fill
    /// their leaves instead of leaving them half empty.
    pub(super) fn split(&self, key: u64) -> (u64, Box<Leaf<L>>) {
        let right = Leaf::<L>::new();
        let n = self.count();
        let keep = if key > self.key(n - 1) { n } else { n / 2 };
        for i in keep..n {
            right.keys[i - keep].put(self.key(i));
            right.values[i - keep].put(self.value(i));
        }
        right.h.set_count(n - keep);
        self.h.set_count(keep);
        (self.key(keep - 1), right)
    }
}

impl<const N: usize> Inner<N> {
    /// A new inner node with no children, at height `level`.
    fn new(level: u8) -> Box<Inner<N>> {
        Box::new(Inner {
            h: Header::new(level),
            keys: zeros(|| AtomicU64::new(0)),
            children: zeros(|| AtomicPtr::new(std::ptr::null_mut())),
        })
    }

    /// An inner node with separator `sep` between children `left` and `right` of height
    /// `child_level`: a new root.
    pub(super) fn root(
        child_level: u8,
        sep: u64,
        left: *mut Header,
        right: *mut Header,
    ) -> Box<Inner<N>> {
        let inner = Inner::<N>::new(child_level + 1);
        inner.keys[0].put(sep);
        inner.children[0].put(left);
        inner.children[1].put(right);
        inner.h.set_count(1);
        inner
    }

    /// The inner node of a header of a level above 0.
    ///
    /// # Safety
    /// `h` heads a live `Inner<N>`.
    #[inline]
    pub(super) unsafe fn of<'a>(h: *const Header) -> &'a Inner<N> {
        // SAFETY: the header is the first field of a `repr(C)` inner node.
        unsafe { &*(h as *const Inner<N>) }
    }

    /// The number of separators (one less than the children).
    #[inline]
    pub(super) fn count(&self) -> usize {
        self.h.count(N - 1)
    }

    /// Whether a child's split would find no room here.
    #[inline]
    pub(super) fn full(&self) -> bool {
        self.count() == N - 1
    }

    /// The child whose range holds `key`, by position, among `n` separators.
    #[inline]
    pub(super) fn child_pos(&self, n: usize, key: u64) -> usize {
        lower_bound(&self.keys, n, key)
    }

    #[inline]
    pub(super) fn key(&self, i: usize) -> u64 {
        self.keys[i].load(Ordering::Relaxed)
    }

    /// Child `i`. Acquire: a child linked by a split is seen initialised.
    #[inline]
    pub(super) fn child(&self, i: usize) -> *mut Header {
        self.children[i].load(Ordering::Acquire)
    }

    /// Links `right`, split off a child with separator `sep`, just after that child (the node is
    /// locked and not full).
    pub(super) fn insert_child(&self, sep: u64, right: *mut Header) {
        let n = self.count();
        let pos = self.child_pos(n, sep);
        shift_up(&self.keys, pos, n);
        shift_up(&self.children, pos + 1, n + 1);
        self.keys[pos].put(sep);
        self.children[pos + 1].store(right, Ordering::Release);
        self.h.set_count(n + 1);
    }

    /// Unlinks child `pos`, whose subtree is empty: a neighbour's range takes over its keys. The node
    /// is locked and keeps at least one child.
    pub(super) fn remove_child(&self, pos: usize) {
        let n = self.count();
        debug_assert!(n >= 1 && pos <= n);
        // Child `pos` goes with the separator below it (the left neighbour's range grows), or, for
        // the first child, with the one above it (the right neighbour's does).
        let sep = pos.saturating_sub(1);
        shift_down(&self.keys, sep, n);
        shift_down(&self.children, pos, n + 1);
        self.h.set_count(n - 1);
    }

    /// Splits the full, locked node: the upper half of its children go to a new node, returned with
    /// the separator that moves up to the parent.
    pub(super) fn split(&self) -> (u64, Box<Inner<N>>) {
        let right = Inner::<N>::new(self.h.level);
        let n = self.count();
        let mid = n / 2;
        for i in mid + 1..n {
            right.keys[i - mid - 1].put(self.key(i));
        }
        for i in mid + 1..=n {
            right.children[i - mid - 1].put(self.children[i].take());
        }
        right.h.set_count(n - mid - 1);
        self.h.set_count(mid);
        (self.key(mid), right)
    }
}
