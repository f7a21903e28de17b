//! The cluster commands: `phasedb node` and the `--cluster` path of `phasedb bench`.

pub mod bench;
pub mod node;
mod report;
