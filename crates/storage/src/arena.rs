//! A per-table arena of fixed-size record slots.
//!
//! Records are carved from chunks of memory mapped for the table. Each thread bumps through a chunk of
//! its own, so an allocation writes no shared memory; a thread that allocates from the arena keeps the
//! slots it frees for its own next allocations (a bounded number; the rest go to the arena's shared
//! free list, as do the slots of threads that never allocated from it), and freed slots are handed
//! out again. Chunks double from 64 KiB to 2 MiB (a transparent huge page); once a table
//! takes full-size chunks it is growing steadily, and a background thread keeps a few of them mapped
//! and touched ahead of need, so that the page faults that zero fresh memory are paid there and not
//! by the thread inserting records.

use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::mapping::{HUGE_PAGE, Mapping, PAGE};

/// Size of the first chunk of a table.
const FIRST_CHUNK: usize = 64 << 10;
/// Size of a full chunk: one transparent huge page.
const FULL_CHUNK: usize = HUGE_PAGE;
/// Full chunks the background thread keeps touched ahead of a growing table.
const AHEAD: usize = 4;

/// What the threads allocating from one arena share.
struct Pool {
    id: u64,
    slot: usize,
    /// Size of the next chunk to map.
    next_chunk: AtomicUsize,
    /// Every chunk handed to a thread; unmapped with the pool.
    chunks: Mutex<Vec<Mapping>>,
    /// Full chunks touched ahead of need by the background thread.
    ready: Mutex<Vec<Mapping>>,
    /// Whether a job to fill `ready` is queued or running.
    filling: AtomicBool,
    /// Freed slots, and whether there are any (read without the lock).
    free: Mutex<Vec<usize>>,
    has_free: AtomicBool,
}

impl Pool {
    /// Puts freed slots on the list every thread takes from.
    fn share(&self, slots: impl FnOnce(&mut Vec<usize>)) {
        slots(&mut self.free.lock().expect("free slots"));
        self.has_free.store(true, Ordering::Relaxed);
    }

    /// A chunk for a thread: a touched one if the background thread has one ready.
    fn take_chunk(self: &Arc<Pool>) -> (usize, usize) {
        let size = self.next_chunk.load(Ordering::Relaxed);
        let chunk = if size >= FULL_CHUNK && self.slot <= FULL_CHUNK {
            let (ready, left) = {
                let mut ready = self.ready.lock().expect("ready chunks");
                (ready.pop(), ready.len())
            };
            if left < AHEAD && !self.filling.swap(true, Ordering::Relaxed) {
                let pool = self.clone();
                crate::prefault::submit(Box::new(move || pool.fill()));
            }
            ready.unwrap_or_else(|| Mapping::new(FULL_CHUNK))
        } else {
            self.next_chunk
                .store((size * 2).min(FULL_CHUNK), Ordering::Relaxed);
            Mapping::new(size.max(self.slot * 4))
        };
        let range = (chunk.addr(), chunk.addr() + chunk.len());
        self.chunks.lock().expect("chunks").push(chunk);
        range
    }

    /// Touches full chunks until `AHEAD` are ready (run by the background thread).
    fn fill(&self) {
        while self.ready.lock().expect("ready chunks").len() < AHEAD {
            let chunk = Mapping::touched(FULL_CHUNK);
            self.ready.lock().expect("ready chunks").push(chunk);
        }
        self.filling.store(false, Ordering::Relaxed);
    }
}

/// One thread's position in one arena.
struct Local {
    id: u64,
    pool: Weak<Pool>,
    next: usize,
    end: usize,
    free: Vec<usize>,
}

impl Drop for Local {
    /// A thread that ends hands the slots it kept back to every thread.
    fn drop(&mut self) {
        if self.free.is_empty() {
            return;
        }
        if let Some(pool) = self.pool.upgrade() {
            pool.share(|free| free.append(&mut self.free));
        }
    }
}

thread_local! {
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

/// Freed slots a thread keeps for its own next allocations; it hands further ones to every thread.
const LOCAL_FREE: usize = 4096;

/// Ids of arenas, never reused, so a thread's entry for a dropped arena is never taken for a new one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Fixed-size slots for the records of one table (see the module documentation).
pub struct RecordArena {
    pool: Arc<Pool>,
}

/// Keeps an arena's memory alive for a deferred free after its table is gone.
pub struct ArenaHandle(Arc<Pool>);

impl RecordArena {
    /// An arena of slots of `size` bytes aligned to `align` (at most a page).
    pub fn new(size: usize, align: usize) -> RecordArena {
        assert!(align <= PAGE && align.is_power_of_two());
        RecordArena {
            pool: Arc::new(Pool {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                slot: size.max(1).next_multiple_of(align),
                next_chunk: AtomicUsize::new(FIRST_CHUNK),
                chunks: Mutex::new(Vec::new()),
                ready: Mutex::new(Vec::new()),
                filling: AtomicBool::new(false),
                free: Mutex::new(Vec::new()),
                has_free: AtomicBool::new(false),
            }),
        }
    }

    /// An uninitialised slot.
    #[inline]
    pub fn alloc(&self) -> NonNull<u8> {
        let pool = &self.pool;
        let addr = LOCALS.with_borrow_mut(|locals| {
            let i = match locals.iter().position(|l| l.id == pool.id) {
                Some(i) => i,
                None => Self::enter(locals, pool),
            };
            let local = &mut locals[i];
            if let Some(addr) = local.free.pop() {
                return addr;
            }
            if pool.has_free.load(Ordering::Relaxed) {
                let mut free = pool.free.lock().expect("free slots");
                std::mem::swap(&mut *free, &mut local.free);
                pool.has_free.store(false, Ordering::Relaxed);
                drop(free);
                if let Some(addr) = local.free.pop() {
                    return addr;
                }
            }
            if local.next + pool.slot > local.end {
                (local.next, local.end) = pool.take_chunk();
            }
            let addr = local.next;
            local.next += pool.slot;
            addr
        });
        // SAFETY: chunks are mapped at non-zero addresses.
        unsafe { NonNull::new_unchecked(addr as *mut u8) }
    }

    /// Starts loading the slots of this thread's next `n` allocations into the cache, so that a
    /// caller about to allocate and fill several records overlaps their cache misses instead of
    /// taking them one after another. Allocates nothing.
    #[inline]
    pub fn prefetch(&self, n: usize) {
        let pool = &self.pool;
        LOCALS.with_borrow(|locals| {
            let Some(local) = locals.iter().find(|l| l.id == pool.id) else {
                return;
            };
            let from_free = local.free.iter().rev().copied();
            let bumped = (local.next..local.end).step_by(pool.slot);
            for addr in from_free.chain(bumped).take(n) {
                let mut line = addr;
                while line < addr + pool.slot {
                    crate::prefetch::line(line as *const u8);
                    line += 64;
                }
            }
        });
    }

    /// Adds this thread's entry for `pool`, dropping entries of arenas that are gone.
    #[cold]
    fn enter(locals: &mut Vec<Local>, pool: &Arc<Pool>) -> usize {
        if locals.len() >= 16 {
            locals.retain(|l| l.pool.strong_count() > 0);
        }
        locals.push(Local {
            id: pool.id,
            pool: Arc::downgrade(pool),
            next: 0,
            end: 0,
            free: Vec::new(),
        });
        locals.len() - 1
    }

    /// A handle that keeps the arena's memory mapped, for a free deferred past the table's life.
    pub fn handle(&self) -> ArenaHandle {
        ArenaHandle(self.pool.clone())
    }

    /// Bytes mapped for the arena, ready chunks included.
    #[cfg(test)]
    pub fn mapped_bytes(&self) -> usize {
        let sum = |v: &Vec<Mapping>| v.iter().map(Mapping::len).sum::<usize>();
        sum(&self.pool.chunks.lock().expect("chunks"))
            + sum(&self.pool.ready.lock().expect("ready"))
    }
}

impl ArenaHandle {
    /// Returns the slot at `addr` for reuse.
    ///
    /// # Safety
    /// `addr` came from this arena's `alloc` and nobody uses the slot any more.
    ///
    /// A thread that allocates from the arena keeps the slots it frees for itself (up to
    /// [`LOCAL_FREE`]), so freeing writes no memory other threads share; others go to the shared list.
    pub unsafe fn free(&self, addr: usize) {
        let pool = &self.0;
        let kept = LOCALS
            .try_with(|locals| {
                // Already borrowed if called from within an allocation.
                let Ok(mut locals) = locals.try_borrow_mut() else {
                    return false;
                };
                match locals.iter_mut().find(|l| l.id == pool.id) {
                    Some(local) if local.free.len() < LOCAL_FREE => {
                        local.free.push(addr);
                        true
                    }
                    _ => false,
                }
            })
            .unwrap_or(false);
        if !kept {
            pool.share(|free| free.push(addr));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_aligned_and_reused() {
        let arena = RecordArena::new(72, 8);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100_000 {
            let p = arena.alloc().as_ptr() as usize;
            assert_eq!(p % 8, 0);
            // SAFETY: the slot is ours and 72 bytes long.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0xab, 72) };
            assert!(seen.insert(p), "slot handed out twice");
        }
        let some = *seen.iter().next().unwrap();
        // SAFETY: the slot came from this arena and is not used.
        unsafe { arena.handle().free(some) };
        assert_eq!(arena.alloc().as_ptr() as usize, some);
        assert!(arena.mapped_bytes() >= 100_000 * 72);
        let lines = RecordArena::new(128, 64);
        for _ in 0..1000 {
            assert_eq!(lines.alloc().as_ptr() as usize % 64, 0);
        }
    }

    #[test]
    fn prefetching_allocates_nothing() {
        let arena = RecordArena::new(96, 64);
        arena.prefetch(4);
        let a = arena.alloc().as_ptr() as usize;
        arena.prefetch(8);
        let b = arena.alloc().as_ptr() as usize;
        assert_eq!(
            b,
            a + 128,
            "the slot after the first, whatever was prefetched"
        );
        // SAFETY: `b` came from this arena and is not used.
        unsafe { arena.handle().free(b) };
        let _ = arena.alloc();
        arena.prefetch(3);
        assert_eq!(arena.alloc().as_ptr() as usize, b + 128);
    }

    #[test]
    fn a_thread_reuses_the_slots_it_frees_and_hands_them_on_when_it_ends() {
        let arena = Arc::new(RecordArena::new(64, 64));
        let freed = std::thread::scope(|s| {
            s.spawn(|| {
                let a = arena.alloc().as_ptr() as usize;
                let b = arena.alloc().as_ptr() as usize;
                // SAFETY: `a` came from this arena and is not used.
                unsafe { arena.handle().free(a) };
                assert!(
                    !arena.pool.has_free.load(Ordering::Relaxed),
                    "kept by the thread, not shared"
                );
                assert_eq!(arena.alloc().as_ptr() as usize, a);
                // SAFETY: as above, for `b`.
                unsafe { arena.handle().free(b) };
                b
            })
            .join()
            .expect("thread")
        });
        assert!(arena.pool.has_free.load(Ordering::Relaxed));
        assert_eq!(
            arena.alloc().as_ptr() as usize,
            freed,
            "the ended thread's slot serves another thread"
        );
    }

    #[test]
    fn threads_allocate_apart() {
        let arena = Arc::new(RecordArena::new(64, 64));
        let all: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let a = &arena;
                    s.spawn(move || (0..50_000).map(|_| a.alloc().as_ptr() as usize).collect())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut flat: Vec<usize> = all.into_iter().flatten().collect();
        let n = flat.len();
        flat.sort_unstable();
        flat.dedup();
        assert_eq!(flat.len(), n);
    }
}
