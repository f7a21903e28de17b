//! Ordered tuples and top-K sets: the column values of Doppel's `OPut` and `TopKInsert`.
//!
//! An ordered tuple is `(order, core, bytes)`. One tuple beats another if its order is larger, or the
//! orders are equal and its core id is larger (and, for one core writing one order twice, its bytes
//! are larger, so the result never depends on the order operations arrive in); an empty column loses
//! to every tuple. A top-K set holds at
//! most K tuples with distinct orders, largest first. Both are stored in place in a row:
//!
//! - tuple of capacity `cap`: `order: i64 | core + 1: u32 (0 = empty) | len: u16 | cap bytes`;
//! - top-K set: `count: u16 | K tuples` kept sorted, best first.
//!
//! These functions only read and write those bytes; what they mean to a transaction is the caller's.

/// Bytes of a tuple's header (order, core, length).
pub const TUPLE_HEADER: usize = 14;

/// Bytes an ordered tuple of capacity `cap` occupies.
pub const fn tuple_width(cap: u16) -> usize {
    TUPLE_HEADER + cap as usize
}

/// Bytes a top-K set of `k` tuples of capacity `cap` occupies.
pub const fn topk_width(k: u8, cap: u16) -> usize {
    2 + k as usize * tuple_width(cap)
}

/// A decoded ordered tuple, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple<'a> {
    /// The order the tuple was written with.
    pub order: i64,
    /// The id of the core (worker) that wrote it; breaks ties between equal orders.
    pub core: u32,
    /// The payload.
    pub value: &'a [u8],
}

impl Tuple<'_> {
    /// The key tuples are compared by.
    #[inline]
    fn rank(&self) -> (i64, u32, &[u8]) {
        (self.order, self.core, self.value)
    }
}

/// Decodes a stored tuple; `None` if the slot is empty.
pub fn tuple(raw: &[u8]) -> Option<Tuple<'_>> {
    let core = u32::from_le_bytes(raw[8..12].try_into().unwrap());
    if core == 0 {
        return None;
    }
    let len = (u16::from_le_bytes(raw[12..14].try_into().unwrap()) as usize)
        .min(raw.len() - TUPLE_HEADER);
    Some(Tuple {
        order: i64::from_le_bytes(raw[..8].try_into().unwrap()),
        core: core - 1,
        value: &raw[TUPLE_HEADER..TUPLE_HEADER + len],
    })
}

/// Writes `t` into a tuple slot, cutting its bytes to the slot's capacity.
pub fn write_tuple(raw: &mut [u8], t: Tuple<'_>) {
    let len = t.value.len().min(raw.len() - TUPLE_HEADER);
    raw[..8].copy_from_slice(&t.order.to_le_bytes());
    raw[8..12].copy_from_slice(&(t.core + 1).to_le_bytes());
    raw[12..14].copy_from_slice(&(len as u16).to_le_bytes());
    raw[TUPLE_HEADER..TUPLE_HEADER + len].copy_from_slice(&t.value[..len]);
    raw[TUPLE_HEADER + len..].fill(0);
}

/// Empties a tuple slot or a top-K set.
pub fn clear(raw: &mut [u8]) {
    raw.fill(0);
}

/// OPut: replaces the stored tuple with `t` if `t` beats it. Returns whether it did.
pub fn oput(raw: &mut [u8], t: Tuple<'_>) -> bool {
    let wins = tuple(raw).is_none_or(|cur| t.rank() > cur.rank());
    if wins {
        write_tuple(raw, t);
    }
    wins
}

/// The tuple slots of a top-K set and how many are filled.
fn slots(raw: &[u8], cap: u16) -> (usize, usize) {
    let width = tuple_width(cap);
    let k = (raw.len() - 2) / width;
    let count = (u16::from_le_bytes([raw[0], raw[1]]) as usize).min(k);
    (k, count)
}

/// The tuples of a top-K set of capacity `cap`, best (largest order) first.
pub fn topk(raw: &[u8], cap: u16) -> impl Iterator<Item = Tuple<'_>> + '_ {
    let width = tuple_width(cap);
    let (_, count) = slots(raw, cap);
    (0..count).filter_map(move |i| tuple(&raw[2 + i * width..2 + (i + 1) * width]))
}

/// TopKInsert: adds `t` to the set. Of two tuples with the same order the one that beats the other
/// (larger core id) stays; past K tuples the one with the smallest order is dropped. Returns whether
/// the set changed.
pub fn topk_insert(raw: &mut [u8], cap: u16, t: Tuple<'_>) -> bool {
    let width = tuple_width(cap);
    let (k, count) = slots(raw, cap);
    let at = |i: usize| 2 + i * width;
    let mut pos = count;
    for i in 0..count {
        let cur = tuple(&raw[at(i)..at(i) + width]).expect("filled slot");
        if cur.order == t.order {
            if t.rank() <= cur.rank() {
                return false;
            }
            write_tuple(&mut raw[at(i)..at(i) + width], t);
            return true;
        }
        if cur.order < t.order {
            pos = i;
            break;
        }
    }
    if pos >= k {
        return false;
    }
    let last = count.min(k - 1);
    raw.copy_within(at(pos)..at(last), at(pos + 1));
    write_tuple(&mut raw[at(pos)..at(pos) + width], t);
    let count = (count + 1).min(k) as u16;
    raw[..2].copy_from_slice(&count.to_le_bytes());
    true
}

/// Merges the top-K set `src` into `dst` (both of capacity `cap`): O(K) insertions.
pub fn topk_merge(dst: &mut [u8], src: &[u8], cap: u16) {
    for t in topk(src, cap) {
        topk_insert(dst, cap, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(order: i64, core: u32, value: &[u8]) -> Tuple<'_> {
        Tuple { order, core, value }
    }

    #[test]
    fn oput_keeps_the_largest_order_then_core() {
        let mut raw = vec![0u8; tuple_width(4)];
        assert_eq!(tuple(&raw), None);
        assert!(oput(&mut raw, t(i64::MIN, 0, b"a")));
        assert!(oput(&mut raw, t(5, 1, b"bb")));
        assert!(!oput(&mut raw, t(5, 0, b"c")));
        assert!(oput(&mut raw, t(5, 2, b"dddddd")));
        assert_eq!(tuple(&raw), Some(t(5, 2, b"dddd")));
        assert!(!oput(&mut raw, t(4, 9, b"e")));
    }

    #[test]
    fn topk_keeps_k_largest_distinct_orders() {
        let cap = 2;
        let mut raw = vec![0u8; topk_width(3, cap)];
        for (o, c) in [(4, 0), (9, 0), (1, 0), (7, 1), (9, 3), (9, 2), (2, 0)] {
            topk_insert(&mut raw, cap, t(o, c, &[o as u8]));
        }
        let got: Vec<(i64, u32)> = topk(&raw, cap).map(|x| (x.order, x.core)).collect();
        assert_eq!(got, vec![(9, 3), (7, 1), (4, 0)]);
        let mut other = vec![0u8; topk_width(3, cap)];
        topk_insert(&mut other, cap, t(8, 5, b"x"));
        topk_merge(&mut raw, &other, cap);
        let got: Vec<i64> = topk(&raw, cap).map(|x| x.order).collect();
        assert_eq!(got, vec![9, 8, 7]);
    }
}
