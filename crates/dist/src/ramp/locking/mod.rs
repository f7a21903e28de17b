//! The lock-based baselines LWNR, LWSR and LWLR: server-side lock table and client transactions.

pub mod client;
pub mod table;
