//! How workloads choose keys. The embedded workloads (`phasedb-workloads`) and the cluster
//! benchmark (`phasedb-dist`) draw from the same generator, so a skew means the same on both.

mod zipf;

pub use zipf::Zipf;
