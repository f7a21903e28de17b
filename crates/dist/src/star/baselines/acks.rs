//! Which replication the receivers have acknowledged (STAR §8.1.3): synchronous replication
//! releases a transaction's write locks and result once the batch that carried its writes is
//! applied everywhere it went, and a group commit completes once every batch sent before it is.
//!
//! A *flush* sends the outbox's buffers (each batch numbered per receiver, see
//! [`crate::star::replicate`]); the tracker notes, for each flush, how far the stream to every node
//! went, and counts a flush *complete* once every receiver acknowledged that far. Receivers apply
//! and acknowledge in stream order, so flushes complete in order and one number (the last complete
//! flush) says which transactions and groups may go.

use std::collections::VecDeque;

use phasedb_net::Addr;

use crate::star::replicate::Outbox;

/// Flushes sent and acknowledgements received, on the node that replicates.
pub(crate) struct Acks {
    /// Per node, the number of the last batch it acknowledged.
    acked: Vec<u64>,
    /// Flushes not complete yet, oldest first: their number and how far the stream to each node
    /// went when they were sent.
    pending: VecDeque<(u64, Vec<u64>)>,
    /// Vectors of completed flushes, reused (flushes allocate nothing once warm).
    spare: Vec<Vec<u64>>,
    /// The number of the last flush.
    flushed: u64,
    /// The number of the last complete flush.
    complete: u64,
}

impl Acks {
    /// A tracker for a cluster of `nodes` nodes.
    pub(crate) fn new(nodes: u32) -> Acks {
        Acks {
            acked: vec![0; nodes as usize],
            pending: VecDeque::new(),
            spare: Vec::new(),
            flushed: 0,
            complete: 0,
        }
    }

    /// The number the next flush will get: what a transaction whose writes are in the outbox now
    /// waits for.
    pub(crate) fn next_flush(&self) -> u64 {
        self.flushed + 1
    }

    /// Notes a flush of `outbox` (called right after it sent its buffers); returns its number.
    pub(crate) fn on_flush(&mut self, outbox: &Outbox) -> u64 {
        self.flushed += 1;
        let mut through = self.spare.pop().unwrap_or_default();
        through.clear();
        through.extend((0..self.acked.len() as Addr).map(|n| outbox.sent_through(n)));
        self.pending.push_back((self.flushed, through));
        self.advance();
        self.flushed
    }

    /// Node `from` applied every batch up to `through`. Ignored from outside the cluster.
    pub(crate) fn on_ack(&mut self, from: Addr, through: u64) {
        if let Some(a) = self.acked.get_mut(from as usize) {
            *a = (*a).max(through);
            self.advance();
        }
    }

    fn advance(&mut self) {
        while let Some((n, through)) = self.pending.front() {
            if through.iter().zip(&self.acked).any(|(t, a)| a < t) {
                break;
            }
            self.complete = *n;
            let (_, v) = self.pending.pop_front().expect("front exists");
            self.spare.push(v);
        }
    }

    /// Whether flush `n` is complete: every batch sent up to it is applied by its receiver.
    pub(crate) fn is_complete(&self, n: u64) -> bool {
        n <= self.complete
    }

    /// Whether every flush is complete.
    pub(crate) fn all_complete(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::star::layout::Layout;
    use phasedb_net::StarConfig;

    #[test]
    fn flushes_complete_in_order_once_every_receiver_acknowledged_them() {
        // Three full replicas: node 0's writes go to nodes 1 and 2.
        let star = StarConfig {
            full_replicas: 3,
            replicas_per_partition: 3,
            ..StarConfig::new(1)
        };
        let outbox = Outbox::new(0, &Layout::new(3, &star).unwrap());
        let mut acks = Acks::new(3);
        // Nothing sent yet: a flush completes at once.
        assert_eq!(acks.next_flush(), 1);
        assert_eq!(acks.on_flush(&outbox), 1);
        assert!(acks.is_complete(1) && acks.all_complete());
        // Two flushes that sent batches: through 2 to node 1 and 1 to node 2, then 3 and 1.
        acks.flushed = 3;
        acks.pending.push_back((2, vec![0, 2, 1]));
        acks.pending.push_back((3, vec![0, 3, 1]));
        acks.on_ack(1, 2);
        assert!(!acks.is_complete(2), "node 2 has not acknowledged");
        acks.on_ack(7, 9); // outside the cluster: ignored
        acks.on_ack(2, 1);
        assert!(acks.is_complete(2) && !acks.is_complete(3));
        acks.on_ack(1, 1); // a late, older acknowledgement changes nothing
        assert!(!acks.is_complete(3));
        acks.on_ack(1, 3);
        assert!(acks.is_complete(3) && acks.all_complete());
        assert_eq!(acks.spare.len(), 3, "the vectors are kept for reuse");
    }
}
