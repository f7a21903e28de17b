//! A digest of a table's rows, to compare replicas after a replication fence.

use phasedb_storage::{Schema, TableId};

use crate::database::Database;
use crate::protocol::Protocol;
use crate::tid::{ABSENT, TidMeta};

impl<P: Protocol> Database<P> {
    /// An order-independent digest of the present rows of `table` whose key passes `keep`: each
    /// row's key, the bytes of its columns and which of its column groups are present, hashed, and
    /// the hashes summed. TIDs are left out. Two replicas give equal digests iff, with overwhelming
    /// probability, they hold the same rows. Reads without concurrency control: only for when no
    /// transaction and no replication runs (after a phase's replication fence).
    pub fn digest(&self, table: TableId, mut keep: impl FnMut(u64) -> bool) -> u64 {
        self.settle();
        let t = self.table(table);
        let (schema, layout) = (t.schema(), t.layout());
        let masks = column_bytes(schema);
        let mut words = vec![0u64; schema.row_words()];
        let guard = phasedb_storage::pin();
        let mut sum = 0u64;
        t.for_each(&guard, |key, rec| {
            if !keep(key) {
                return;
            }
            let mut present = 0u64;
            for (g, group) in schema.groups().iter().enumerate() {
                let out = &mut words[group.word..group.word + group.words];
                if rec.meta(layout, g).tid().load() & ABSENT == 0 {
                    present |= 1 << g;
                    rec.copy_group(layout, g, out);
                } else {
                    out.fill(0);
                }
            }
            if present == 0 {
                return;
            }
            let mut h = mix(key ^ 0x243f_6a88_85a3_08d3);
            h = mix(h ^ present);
            for (w, m) in words.iter().zip(&masks) {
                h = mix(h ^ (w & m));
            }
            sum = sum.wrapping_add(h);
        });
        sum
    }
}

/// Per row word, the bits that hold column bytes (padding between columns is left out).
fn column_bytes(schema: &Schema) -> Vec<u64> {
    let mut masks = vec![0u64; schema.row_words()];
    for c in 0..schema.columns().len() {
        let s = schema.span(c);
        masks[s.first] |= s.first_mask;
        if s.last > s.first {
            masks[s.first + 1..s.last].fill(u64::MAX);
            masks[s.last] |= s.last_mask;
        }
    }
    masks
}

/// A bijective 64-bit mixer (MurmurHash3's finaliser) after an odd multiply, chained over a row's
/// words.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^= z >> 33;
    z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
    z ^= z >> 33;
    z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}
