//! The RAMP paper's experiments, each point on a cluster of `phasedb node` processes: clients,
//! sweeps over the workload's parameters, cooperative termination and scale-out. They share how a
//! point runs a cluster (`run`) and the report's claims (`report`).

pub mod clients;
pub mod ctp;
mod report;
mod run;
pub mod scale;
pub mod sweeps;
