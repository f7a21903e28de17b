//! Every experiment of the seeds (`shared/EXPERIMENTS.md`), with the runner of those this build has.

use super::{Artifacts, Settings};

/// Runs one experiment with the given settings.
pub type Runner = fn(&Settings) -> Result<Artifacts, String>;

/// One of the seeds' experiments.
pub struct Experiment {
    /// The name `phasedb experiment NAME` takes.
    pub name: &'static str,
    /// The paper it comes from.
    pub paper: &'static str,
    /// The setup in one line.
    pub setup: &'static str,
    /// The runner (`None` for an experiment listed before it is built).
    pub run: Option<Runner>,
}

const DOPPEL: &str = "Doppel (phase reconciliation)";
const GRANULARITY: &str = "OCC timestamp granularity";
const PDUR: &str = "P-DUR (parallel deferred update replication)";
const RAMP: &str = "RAMP (read atomic multi-partition)";
const STAR: &str = "STAR (asymmetric replication)";
const SILOR: &str = "SiloR (fast durability and recovery)";
const SERVED: &str = "phasedb serve (the engine as a network server)";

/// All 23 experiments, in the order of `EXPERIMENTS.md`, then `granularity-shift` (issue 39), `star-failover`
/// and `durability` (issue 34, SiloR), and `served-ycsb` (issue 36).
pub const ALL: &[Experiment] = &[
    Experiment {
        name: "incr1",
        paper: DOPPEL,
        setup: "increment one of 1M keys; x = % of txns on one hot key; Doppel, OCC, 2PL, Atomic",
        run: Some(super::doppel::incr1::run),
    },
    Experiment {
        name: "incr1-scaling",
        paper: DOPPEL,
        setup: "INCR1 with every txn on the hot key; x = cores",
        run: Some(super::doppel::incr1_scaling::run),
    },
    Experiment {
        name: "incr1-moving",
        paper: DOPPEL,
        setup: "INCR1 with 10% hot and a hot key that moves every 5 s; throughput over time",
        run: Some(super::doppel::incr1_moving::run),
    },
    Experiment {
        name: "incrz",
        paper: DOPPEL,
        setup: "increments of zipfian keys, alpha 0-2; throughput and keys split",
        run: Some(super::doppel::incrz::run),
    },
    Experiment {
        name: "like",
        paper: DOPPEL,
        setup: "LIKE: page counts (zipf 1.4) and user rows; x = % write txns",
        run: Some(super::doppel::like::run),
    },
    Experiment {
        name: "like-latency",
        paper: DOPPEL,
        setup: "LIKE at 50% writes, uniform vs zipf 1.4; p50/p99 latency per txn type",
        run: Some(super::doppel::like_latency::run),
    },
    Experiment {
        name: "phase-length",
        paper: DOPPEL,
        setup: "LIKE variants; x = phase length 1-100 ms; read latency and throughput",
        run: Some(super::doppel::phase_length::run),
    },
    Experiment {
        name: "rubis",
        paper: DOPPEL,
        setup: "RUBiS bidding mix and a 50%-bids zipfian mix with splittable bids",
        run: Some(super::doppel::rubis::run),
    },
    Experiment {
        name: "granularity-ycsb",
        paper: GRANULARITY,
        setup: "YCSB, 16 ops each reading or writing one column of a zipfian key; coarse vs fine timestamps; every protocol; x = threads",
        run: Some(super::granularity::ycsb::run),
    },
    Experiment {
        name: "granularity-tpcc",
        paper: GRANULARITY,
        setup: "TPC-C NewOrder + Payment + OrderStatus on 1 warehouse; coarse vs fine District/Customer; every protocol; x = threads",
        run: super::granularity::tpcc::RUNNER,
    },
    Experiment {
        name: "granularity-shift",
        paper: GRANULARITY,
        setup: "counters whose conflicting columns change halfway; OCC with fixed and automatic column groups (issue 39); x = seconds",
        run: Some(super::granularity::shift::run),
    },
    Experiment {
        name: "pdur-baseline",
        paper: PDUR,
        setup: "micro txn types I/II/III; P-DUR partitions vs DUR replicas vs an embedded store; x = cores",
        run: Some(super::pdur::baseline::run),
    },
    Experiment {
        name: "pdur-cross",
        paper: PDUR,
        setup: "P-DUR; x = % cross-partition txns",
        run: Some(super::pdur::cross::run),
    },
    Experiment {
        name: "pdur-twitter",
        paper: PDUR,
        setup: "Twitter-like timeline/post/follow mix; x = partitions",
        run: Some(super::pdur::twitter::run),
    },
    Experiment {
        name: "ramp-clients",
        paper: RAMP,
        setup: "5 partitions, YCSB zipf, 95% read-only txns of 4 ops; x = clients; RAMP-F/S/H vs locks",
        run: Some(super::ramp::clients::run),
    },
    Experiment {
        name: "ramp-sweeps",
        paper: RAMP,
        setup: "vary read %, txn size, value size and database size",
        run: Some(super::ramp::sweeps::run),
    },
    Experiment {
        name: "ramp-ctp",
        paper: RAMP,
        setup: "RAMP-F writes with dropped COMMIT messages; cooperative termination",
        run: Some(super::ramp::ctp::run),
    },
    Experiment {
        name: "ramp-scale",
        paper: RAMP,
        setup: "uniform access; x = servers",
        run: Some(super::ramp::scale::run),
    },
    Experiment {
        name: "star-compare",
        paper: STAR,
        setup: "YCSB, NewOrder, Payment; x = % cross-partition; STAR vs its baselines (PB-OCC; Dist-OCC, Dist-S2PL once built), async and sync replication",
        run: Some(super::star::compare::run),
    },
    Experiment {
        name: "star-latency",
        paper: STAR,
        setup: "YCSB at 10/50/90% cross-partition, 10 ms iteration; p50/p99 commit latency, STAR vs its baselines, async and sync",
        run: Some(super::star::latency::run),
    },
    Experiment {
        name: "star-calvin",
        paper: STAR,
        setup: "NewOrder on 4 nodes; x = % cross-partition; STAR vs Calvin-1:3, -2:2 and -4",
        run: Some(super::star::calvin::run),
    },
    Experiment {
        name: "star-iteration",
        paper: STAR,
        setup: "NewOrder and YCSB at 10% cross-partition; x = iteration time 1.5-150 ms; throughput and overhead",
        run: Some(super::star::iteration::run),
    },
    Experiment {
        name: "star-replication",
        paper: STAR,
        setup: "Payment; value vs hybrid replication; x = % cross-partition; bytes per txn and throughput",
        run: Some(super::star::replication::run),
    },
    Experiment {
        name: "star-network",
        paper: STAR,
        setup: "NewOrder + Payment, 40 ms iteration; x = injected one-way delay 0.1-10 ms, STAR vs its async baselines",
        run: Some(super::star::network::run),
    },
    Experiment {
        name: "star-failover",
        paper: STAR,
        setup: "YCSB on 3 nodes; throughput per 100 ms through a partial replica's and a coordinator's SIGKILL",
        run: Some(super::star::failover::run),
    },
    Experiment {
        name: "durability",
        paper: SILOR,
        setup: "YCSB and TPC-C NewOrder+Payment at 2 threads with and without group-commit logging; durable p99; log replay rate; 10M-row YCSB recovery (issue 34)",
        run: Some(super::silor::durability::run),
    },
    Experiment {
        name: "served-ycsb",
        paper: SERVED,
        setup: "YCSB A's operations embedded and through `phasedb serve` with the Rust client (pipeline 64 and 1024), alternating; served txn/s and served/embedded (issue 36)",
        run: Some(super::served::ycsb::run),
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    ALL.iter().find(|e| e.name == name)
}

/// Names of the experiments this build runs.
pub fn available() -> Vec<&'static str> {
    ALL.iter()
        .filter(|e| e.run.is_some())
        .map(|e| e.name)
        .collect()
}
