//! The transaction engine's integration tests, in one binary: the protocols' generic code is
//! compiled once for all of them rather than once per test file.

mod api;
mod calvin;
mod common;
mod commute;
mod doppel;
mod durability;
mod durable_groups;
mod elle;
mod granularity;
mod hold_locks;
mod hot;
mod reclaim;
mod remote_scans;
mod serializable;
mod star;
mod upgrade;
