//! The STAR paper's experiments that need no baseline, each point on its own cluster of
//! `phasedb node` processes running STAR (`phasedb_dist::star`), the nodes generating their own
//! load: the overhead of phase transitions against the iteration time (§8.4) and value against
//! hybrid replication (§8.5). They share how a point runs a cluster (`run`) and the report
//! (`report`).

pub mod iteration;
pub mod replication;
mod report;
mod run;
