//! The OCC timestamp-granularity paper's experiments: YCSB and TPC-C with coarse (one timestamp per
//! row) and fine (one per column group) timestamps, for every protocol over thread counts. They share
//! the grid of points and the report.

mod grid;
mod report;
pub mod shift;
pub mod tpcc;
pub mod ycsb;
