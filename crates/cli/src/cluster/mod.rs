//! The cluster commands: `phasedb node` and the `--cluster` path of `phasedb bench`.

pub mod bench;
mod calvin_node;
pub mod failures;
pub mod node;
pub mod pdur;
mod pdur_node;
mod report;
pub mod star;
mod star_history;
mod star_node;
mod star_report;
pub mod star_workload;
