//! The engine served to other processes (`phasedb serve`, issue 36): its throughput through the Rust
//! client against the embedded engine's on the same operations.

pub mod ycsb;
