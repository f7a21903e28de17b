//! The STAR paper's experiments, each point on its own cluster of `phasedb node` processes running
//! STAR (`phasedb_dist::star`), the nodes generating their own load: the overhead of phase
//! transitions against the iteration time (§8.4), value against hybrid replication (§8.5), commit
//! latency (§8.2.3), the network's delay (§8.6) and Calvin (§8.3). The last two check STAR's own claims; their
//! claims about the baselines wait for PB-OCC, Dist-OCC and Dist-S2PL. They share how a point runs
//! a cluster (`run`) and the report (`report`).

pub mod calvin;
pub mod iteration;
pub mod latency;
pub mod network;
pub mod replication;
mod report;
mod run;
