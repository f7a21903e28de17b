//! Clients over TCP (Algorithm 3 executed remotely): each replica offers one client endpoint; a
//! client opens a connection and runs transactions through it — reads, then a commit with the
//! buffered writes — and sees one endpoint whatever partitions it touches: a session reads
//! another partition from that partition's worker inside the process.
//!
//! - [`wire`]: the client protocol's frames and their bounded, non-panicking decoding.
//! - [`session`]: the server side — acceptor, one session per connection, the dispatcher of
//!   decisions to sessions.
//! - [`remote`]: a closed-loop load generator that runs the paper's workloads over connections.

pub mod remote;
pub mod session;
pub mod wire;

pub use session::{Endpoint, EndpointStats};
