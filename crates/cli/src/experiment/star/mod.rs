//! The STAR paper's experiments, each point on its own cluster of `phasedb node` processes running
//! STAR (`phasedb_dist::star`) or one of its baselines, the nodes generating their own load: STAR
//! against the baselines (§8.2) and against Calvin (§8.3), the overhead of phase transitions
//! against the iteration time (§8.4), value against hybrid replication (§8.5), commit latency
//! (§8.2.3) and the network's delay (§8.6). They share how a point runs a cluster (`run`), the
//! algorithms compared (`contenders`), the lookups that set STAR beside a baseline (`versus`) and
//! the report (`report`).

pub mod calvin;
pub mod compare;
mod contenders;
pub mod failover;
pub mod iteration;
pub mod latency;
pub mod network;
pub mod replication;
mod report;
mod run;
mod versus;
