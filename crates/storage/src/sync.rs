//! The atomics and the yield the B+-tree is written against. Its shuttle test
//! (`tests/btree_shuttle.rs`) compiles the same tree against shuttle's, which explores the
//! interleavings of these operations.

pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
pub(crate) use std::thread::yield_now;
