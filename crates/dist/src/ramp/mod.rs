//! Read Atomic Multi-Partition transactions (Bailis, Fekete, Hellerstein, Ghodsi, Stoica; SIGMOD
//! 2014) and the baselines the paper measured them against.
//!
//! - [`rounds`]: RAMP-Fast, RAMP-Small and RAMP-Hybrid client logic (Algorithms 1–3): what metadata a
//!   writer attaches, and which second-round reads repair a fractured first round; [`hint`]: the
//!   read-set hints that let servers leave out metadata the reader cannot use.
//! - [`server`]: the partition server — multi-version store with lastCommit and prepared versions,
//!   PREPARE/COMMIT/GET, cooperative termination, faster commit detection and GC — plus the server
//!   halves of the baselines.
//! - [`client`]: one sans-I/O [`client::TxnClient`] per concurrent client, running GET_ALL/PUT_ALL for
//!   RAMP-F/S/H or a baseline (NWNR, [`locking`] LWNR/LWSR/LWLR, [`epci`] E-PCI).
//! - [`node`]: a cluster member (server + proxy clients) over TCP; [`library`]: a blocking client;
//!   [`bench`](mod@bench): the closed-loop cluster benchmark; [`sim`]: actors and histories for
//!   simulator tests.
//! - [`msg`]: the wire messages; [`ts`], [`words`], [`write_set`], [`bloom`], [`expiring`]: their
//!   parts; [`txn_check`]: validation of submitted transactions; [`history`]: Read Atomic histories.

pub mod bench;
pub mod bloom;
pub mod client;
pub mod epci;
pub mod expiring;
pub mod hint;
pub mod history;
pub mod library;
pub mod locking;
pub mod msg;
pub mod node;
pub mod rounds;
pub mod server;
pub mod sim;
pub mod ts;
pub mod txn_check;
pub mod words;
pub mod write_set;
