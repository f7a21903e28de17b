//! TPC-C's random functions (clause 4.3.2 and 2.1.6): uniform ranges, NURand with its C constants,
//! customer last names from syllables, random a-strings and n-strings, zip codes and the "ORIGINAL"
//! data strings.

use std::sync::LazyLock;

use memchr::memmem;
use rand::RngExt;
use rand::rngs::SmallRng;

/// The syllables last names are made of (clause 4.3.2.3).
pub const SYLLABLES: [&[u8]; 10] = [
    b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING",
];

/// Longest last name ("CALLYCALLYCALLY", "ATIONATIONATION").
pub const MAX_LAST_NAME: usize = 15;

/// Writes the last name of number `num` (0..=999) into `out`; returns its length.
pub fn last_name(num: u32, out: &mut [u8; 16]) -> usize {
    debug_assert!(num < 1000);
    let mut len = 0;
    for digit in [num / 100, num / 10 % 10, num % 10] {
        let s = SYLLABLES[digit as usize];
        out[len..len + s.len()].copy_from_slice(s);
        len += s.len();
    }
    len
}

/// The constants C of NURand for the three fields that use it (clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRandC {
    /// C for `C_LAST` (A = 255).
    pub c_last: u32,
    /// C for `C_ID` (A = 1023).
    pub c_id: u32,
    /// C for `OL_I_ID` (A = 8191).
    pub ol_i_id: u32,
}

impl NuRandC {
    /// Random constants, as chosen for the load.
    pub fn random(rng: &mut SmallRng) -> NuRandC {
        NuRandC {
            c_last: rng.random_range(0..=255),
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }

    /// Constants for the measured run given the load's: `C_LAST`'s differs from the load's by a delta
    /// in 65..=119 other than 96 and 112 (clause 2.1.6.1); the others are kept.
    pub fn for_run(&self, rng: &mut SmallRng) -> NuRandC {
        loop {
            let c_last = rng.random_range(0..=255u32);
            if Self::valid_run_delta(self.c_last, c_last) {
                return NuRandC { c_last, ..*self };
            }
        }
    }

    /// Whether `run` is a valid run-time C for `C_LAST` given the load's `load`.
    pub fn valid_run_delta(load: u32, run: u32) -> bool {
        let delta = load.abs_diff(run);
        (65..=119).contains(&delta) && delta != 96 && delta != 112
    }
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
#[inline]
pub fn nurand(rng: &mut SmallRng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1)) + x
}

/// A customer id, NURand(1023, 1, 3000).
#[inline]
pub fn customer_id(rng: &mut SmallRng, c: &NuRandC) -> u32 {
    nurand(rng, 1023, 1, 3000, c.c_id)
}

/// A last-name number, NURand(255, 0, 999).
#[inline]
pub fn last_name_number(rng: &mut SmallRng, c: &NuRandC) -> u32 {
    nurand(rng, 255, 0, 999, c.c_last)
}

/// An item id, NURand(8191, 1, 100000).
#[inline]
pub fn item_id(rng: &mut SmallRng, c: &NuRandC) -> u32 {
    nurand(rng, 8191, 1, 100_000, c.ol_i_id)
}

const ALPHANUMERIC: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Fills `out[..len]` with a random a-string (alphanumeric) of length in `min..=max`; returns `len`.
pub fn a_string(rng: &mut SmallRng, min: usize, max: usize, out: &mut [u8]) -> usize {
    let len = rng.random_range(min..=max);
    for b in &mut out[..len] {
        *b = ALPHANUMERIC[rng.random_range(0..ALPHANUMERIC.len())];
    }
    len
}

/// Fills `out[..len]` with a random n-string (digits) of length in `min..=max`; returns `len`.
pub fn n_string(rng: &mut SmallRng, min: usize, max: usize, out: &mut [u8]) -> usize {
    let len = rng.random_range(min..=max);
    for b in &mut out[..len] {
        *b = b'0' + rng.random_range(0..10u8);
    }
    len
}

/// A zip code: a random n-string of 4 followed by "11111" (clause 4.3.2.7).
pub fn zip(rng: &mut SmallRng) -> [u8; 9] {
    let mut z = *b"000011111";
    n_string(rng, 4, 4, &mut z[..4]);
    z
}

/// `I_DATA` / `S_DATA`: an a-string of 26..=50 that holds "ORIGINAL" at a random position for 10% of
/// rows (clause 4.3.3.1); returns the length.
pub fn data_string(rng: &mut SmallRng, out: &mut [u8; 50]) -> usize {
    let len = a_string(rng, 26, 50, out);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=len - ORIGINAL.len());
        out[at..at + ORIGINAL.len()].copy_from_slice(ORIGINAL);
    }
    len
}

/// The marker of brand items in `I_DATA` and `S_DATA`.
pub const ORIGINAL: &[u8] = b"ORIGINAL";

/// The searcher for "ORIGINAL", built once: NewOrder looks for it in every line's item and stock
/// data, and a vectorised search is about 2.5x faster than comparing each window of those 26-50 bytes.
static ORIGINAL_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(ORIGINAL));

/// Whether `data` contains "ORIGINAL".
pub fn is_original(data: &[u8]) -> bool {
    ORIGINAL_FINDER.find(data).is_some()
}

/// Current time in microseconds since the Unix epoch (the dates of the database).
pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn last_names_follow_the_syllable_table() {
        let mut buf = [0u8; 16];
        let name = |n, buf: &mut [u8; 16]| {
            let len = last_name(n, buf);
            String::from_utf8(buf[..len].to_vec()).unwrap()
        };
        assert_eq!(name(0, &mut buf), "BARBARBAR");
        assert_eq!(name(371, &mut buf), "PRICALLYOUGHT");
        assert_eq!(name(999, &mut buf), "EINGEINGEING");
        assert_eq!(name(888, &mut buf), "ATIONATIONATION");
        let longest = (0..1000).map(|n| last_name(n, &mut buf)).max().unwrap();
        assert_eq!(longest, MAX_LAST_NAME);
        // All 1000 names are distinct.
        let names: std::collections::HashSet<String> =
            (0..1000).map(|n| name(n, &mut buf)).collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = SmallRng::seed_from_u64(7);
        let c = NuRandC::random(&mut rng);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let id = customer_id(&mut rng, &c);
            assert!((1..=3000).contains(&id));
            hits[id as usize] += 1;
            let i = item_id(&mut rng, &c);
            assert!((1..=100_000).contains(&i));
            let l = last_name_number(&mut rng, &c);
            assert!(l < 1000);
        }
        // Non-uniform: the busiest customer gets far more than the uniform share (~67).
        assert!(*hits.iter().max().unwrap() > 150);
        // Most of the range comes up (values whose low bits are mostly zero are rare by design).
        for (a, x, y) in [(255, 0, 999), (1023, 1, 3000)] {
            let mut seen = vec![false; y as usize + 1];
            for _ in 0..500_000 {
                seen[nurand(&mut rng, a, x, y, 0) as usize] = true;
            }
            let distinct = seen.iter().filter(|&&s| s).count();
            assert!(
                distinct * 10 > (y - x + 1) as usize * 9,
                "NURand({a}, {x}, {y}): {distinct}"
            );
        }
    }

    #[test]
    fn run_time_c_last_obeys_the_delta_rule() {
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..1000 {
            let load = NuRandC::random(&mut rng);
            let run = load.for_run(&mut rng);
            let delta = load.c_last.abs_diff(run.c_last);
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
            assert!(run.c_last <= 255);
            assert_eq!((run.c_id, run.ol_i_id), (load.c_id, load.ol_i_id));
        }
        assert!(!NuRandC::valid_run_delta(100, 196));
        assert!(NuRandC::valid_run_delta(100, 165));
    }

    #[test]
    fn strings_have_the_specified_shapes() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut originals = 0;
        for _ in 0..10_000 {
            let mut d = [0u8; 50];
            let len = data_string(&mut rng, &mut d);
            assert!((26..=50).contains(&len));
            originals += is_original(&d[..len]) as u32;
            let z = zip(&mut rng);
            assert!(z[..4].iter().all(u8::is_ascii_digit) && &z[4..] == b"11111");
        }
        assert!((800..1200).contains(&originals), "{originals} of 10000");
    }

    #[test]
    fn original_is_found_anywhere_and_only_whole() {
        assert!(is_original(b"ORIGINAL"));
        assert!(is_original(
            b"ORIGINALxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        ));
        assert!(is_original(
            b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxORIGINAL"
        ));
        assert!(is_original(b"xxxxxxxxxxxxxxxxxORIGINALxxxxxxxxx"));
        assert!(!is_original(b""));
        assert!(!is_original(b"ORIGINA"));
        assert!(!is_original(b"xxxxxxxxxxxxxORIGINxALxxxxxxxxxxxxx"));
        assert!(!is_original(
            b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxORIGINA"
        ));
        assert!(!is_original(b"xxxxxxxxxxxxxoriginalxxxxxxxxxxxxxx"));
    }
}
