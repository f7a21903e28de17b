//! A short list of `u64`s held in place (copying or decoding one allocates nothing) or a longer one
//! shared behind an `Arc`: the storage of RAMP-F write sets and RAMP-H Bloom filters.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Lists up to this long are held in place (a YCSB transaction writes 4 items; a default Bloom
/// filter has 4 words).
pub const INLINE: usize = 4;

/// The list.
#[derive(Clone)]
pub enum Words {
    /// At most [`INLINE`] words, in place.
    Inline {
        /// Words in use.
        len: u8,
        /// The words; those past `len` are zero.
        words: [u64; INLINE],
    },
    /// More words, shared by every copy.
    Shared(Arc<[u64]>),
}

impl Deref for Words {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        match self {
            Words::Inline { len, words } => &words[..*len as usize],
            Words::Shared(words) => words,
        }
    }
}

impl From<&[u64]> for Words {
    fn from(words: &[u64]) -> Words {
        if words.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..words.len()].copy_from_slice(words);
            Words::Inline {
                len: words.len() as u8,
                words: inline,
            }
        } else {
            Words::Shared(words.into())
        }
    }
}

impl From<Vec<u64>> for Words {
    fn from(words: Vec<u64>) -> Words {
        if words.len() <= INLINE {
            Words::from(words.as_slice())
        } else {
            Words::Shared(words.into())
        }
    }
}

impl FromIterator<u64> for Words {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Words {
        let mut b = Builder::default();
        for w in iter {
            b.push(w);
        }
        b.finish()
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Words) -> bool {
        **self == **other
    }
}

impl Eq for Words {}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Gathers words one at a time (decoders): in place up to [`INLINE`], then on the heap.
#[derive(Default)]
pub struct Builder {
    inline: [u64; INLINE],
    len: usize,
    spilled: Vec<u64>,
}

impl Builder {
    /// Appends a word.
    pub fn push(&mut self, w: u64) {
        if self.len < INLINE {
            self.inline[self.len] = w;
            self.len += 1;
        } else {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline);
            }
            self.spilled.push(w);
        }
    }

    /// The list gathered.
    pub fn finish(self) -> Words {
        if self.spilled.is_empty() {
            Words::Inline {
                len: self.len as u8,
                words: self.inline,
            }
        } else {
            Words::Shared(self.spilled.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_stay_in_place_and_long_ones_are_shared() {
        for n in [0u64, 1, 4, 5, 40] {
            let w: Words = (0..n).collect();
            assert_eq!(&*w, (0..n).collect::<Vec<_>>().as_slice());
            assert_eq!(matches!(w, Words::Inline { .. }), n <= INLINE as u64);
            assert_eq!(Words::from((0..n).collect::<Vec<_>>()), w);
        }
    }
}
