//! E-PCI, the Eiger-style baseline: 2PC through a per-transaction coordinator partition whose commit
//! time orders versions, and reads at a client-chosen timestamp that ask coordinators about
//! overlapping prepared writes ("commit checks"). It violates partition independence on purpose.

pub mod client;
pub mod server;
