//! The P-DUR paper's experiments (Pacheco, Sciascia, Pedone, §VI): each point runs the P-DUR
//! benchmark (`crate::cluster::pdur`): P-DUR or DUR replicas as `phasedb node` processes on
//! 127.0.0.1 generating their own load, or the embedded store in this process. `baseline` scales
//! P-DUR's partitions against DUR's replicas and the embedded store on the micro-benchmark (§VI-C),
//! `cross` sweeps the share of cross-partition transactions (§VI-D), `twitter` runs the
//! Twitter-like workload (§VI-F). They share how a point runs (`run`) and the report (`report`).

pub mod baseline;
pub mod cross;
mod report;
mod run;
pub mod twitter;
