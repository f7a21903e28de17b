//! Read-only transactions at read committed on any replica (STAR §4.3: "read-only transactions
//! can run on secondaries at read committed"), when the client asks for it with
//! [`StarMsg::ReadCommitted`].
//!
//! The node runs the request at once on its own copies, whatever the phase, on a worker of its
//! own, and answers without waiting for the phase to end. Everything a node does runs on its one
//! thread, so the read sees only writes that committed (on this node, or on a primary whose
//! replication records this node applied), never a transaction's uncommitted writes — but it may
//! see some of a phase's writes and not others, and writes of a phase not yet fenced: read
//! committed, not serializable, so it is left out of the recorded history. One caveat of the
//! fail-over (`failover`): when a node fails, the writes its interrupted phase replicated are
//! taken back, and a read that ran before that may have seen them.

use serde::Serialize;
use serde::de::DeserializeOwned;

use phasedb_net::{Addr, Transport};
use phasedb_txn::{Procedures, TxError};

use crate::star::msg::{Outcome, StarMsg};
use crate::star::node::{StarNode, decode_request};
use crate::star::requests::{Origin, answer};

impl<'db, W> StarNode<'db, W>
where
    W: Procedures,
    W::Request: Serialize + DeserializeOwned,
{
    /// Runs client `client`'s read-only request `rid` here at read committed and answers it.
    pub(crate) fn read_committed<T: Transport<StarMsg>>(
        &mut self,
        net: &mut T,
        client: Addr,
        rid: u64,
        body: &[u8],
    ) {
        let origin = Origin::Client { addr: client, rid };
        let (req, touched) = match decode_request(self.workload, body) {
            Ok(decoded) => decoded,
            Err(text) => return self.reply_error(net, origin, text),
        };
        if !self.workload.read_only(&req) {
            let text = "the request writes: only read-only requests run at read committed";
            return self.reply_error(net, origin, text.into());
        }
        let partitions = self.layout.partitions();
        let missing = touched
            .as_slice()
            .iter()
            .find(|&&p| p >= partitions || !self.layout.holds(self.me, p));
        if let Some(p) = missing {
            let text = format!(
                "node {} holds no copy of partition {p}: send the read to a node that holds every partition it reads",
                self.me
            );
            return self.reply_error(net, origin, text);
        }
        let result = self.workload.run(&req, &mut self.rc_worker);
        if self.db.config().record_history {
            // Not serializable by design: kept out of the checked history.
            drop(self.rc_worker.take_history());
        }
        let outcome = match result {
            Ok(()) => Outcome::Committed { phase: self.phase },
            Err(TxError::UserAbort) => Outcome::Aborted { phase: self.phase },
            Err(e) => {
                let text = format!("the read-only transaction failed: {e}");
                return self.reply_error(net, origin, text);
            }
        };
        self.requests.read_committed += 1;
        answer(net, origin, outcome);
    }
}
