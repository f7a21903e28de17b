//! RAMP-Fast, RAMP-Small and RAMP-Hybrid client logic (Algorithms 1–3): what metadata a writer
//! attaches, and which second-round reads repair a fractured first round — and the read-set hints
//! that let servers leave out metadata the reader cannot use.

pub mod client;
pub mod hint;
