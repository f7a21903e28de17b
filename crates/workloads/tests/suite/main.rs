//! The workloads' integration tests, in one binary: the protocols' and workloads' generic code is
//! compiled once for all of them rather than once per test file. The allocation-counting tests
//! stay binaries of their own, since each installs its own global allocator.

#[path = "../common/mod.rs"]
mod common;

mod append;
mod bank;
mod incr;
mod like;
mod procedures;
mod rubis;
mod shift;
mod tpcc;
