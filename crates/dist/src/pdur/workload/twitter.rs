//! The Twitter-like social network (§VI-A, §VI-F): per user a list of producers (whom the user
//! follows), of consumers (who follows the user) and of recent posts, all stored in the user's
//! partition. The mix is 50% timeline (read the producers, then their recent posts: read-only,
//! cross-partition when producers live elsewhere), 40% post (append a 10–50 character message to
//! the user's posts: single-partition) and 10% follow (update the follower's producers and the
//! followed user's consumers: cross-partition with probability 0.5, `follow_cross`).

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::Logic;
use crate::pdur::client::Transaction;
use crate::pdur::request::{PartitionId, partition_of};
use crate::ramp::msg::{Key, Value};

/// The paper's user count.
pub const PAPER_USERS: u64 = 420_000;
/// Ids a producer or consumer list keeps (the newest).
pub const LIST_LEN: usize = 16;
/// Posts a user's recent-posts item keeps (the newest).
pub const RECENT_POSTS: usize = 4;
/// Producers each user follows at load.
pub const INITIAL_FOLLOWS: usize = 4;

/// Which of a user's items a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Users the user follows.
    Producers = 0,
    /// Users following the user.
    Consumers = 1,
    /// The user's newest posts.
    Posts = 2,
}

/// The social network's layout: `users` users over `partitions` partitions, user `u` in
/// partition `u mod partitions` with all its items.
#[derive(Clone, Copy, Debug)]
pub struct TwitterConfig {
    /// Users.
    pub users: u64,
    /// Partitions of the replica.
    pub partitions: usize,
    /// Probability that a follow is cross-partition (the paper's 0.5, [`FOLLOW_CROSS`]).
    pub follow_cross: f64,
}

/// The paper's share of cross-partition follows.
pub const FOLLOW_CROSS: f64 = 0.5;

impl TwitterConfig {
    /// `users` users over `partitions` partitions, follows cross-partition as in the paper.
    pub fn new(users: u64, partitions: usize) -> TwitterConfig {
        TwitterConfig {
            users,
            partitions,
            follow_cross: FOLLOW_CROSS,
        }
    }

    /// Users rounded up to a multiple of the partitions, so `key(u, f) mod P = u mod P`.
    fn stride(&self) -> u64 {
        self.users.div_ceil(self.partitions as u64) * self.partitions as u64
    }

    /// The key of user `u`'s item `f`.
    pub fn key(&self, u: u64, f: Field) -> Key {
        u + self.stride() * f as u64
    }

    /// The partition of user `u`.
    pub fn partition(&self, u: u64) -> PartitionId {
        partition_of(u, self.partitions)
    }

    /// Loads every user: [`INITIAL_FOLLOWS`] producers chosen at random (seeded), the consumer
    /// lists that follow from them, and one post each.
    pub fn load(&self, seed: u64, mut put: impl FnMut(Key, Value)) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut consumers: Vec<Vec<u32>> = vec![Vec::new(); self.users as usize];
        for u in 0..self.users {
            let mut producers = Vec::new();
            while producers.len() < INITIAL_FOLLOWS.min(self.users as usize - 1) {
                let v = rng.random_range(0..self.users) as u32;
                if v as u64 != u && !producers.contains(&v) {
                    producers.push(v);
                }
            }
            for &v in &producers {
                let c = &mut consumers[v as usize];
                if c.len() == LIST_LEN {
                    c.remove(0);
                }
                c.push(u as u32);
            }
            put(self.key(u, Field::Producers), encode_ids(&producers));
            put(
                self.key(u, Field::Posts),
                format!("hello from {u}").into_bytes(),
            );
        }
        for (u, c) in consumers.iter().enumerate() {
            put(self.key(u as u64, Field::Consumers), encode_ids(c));
        }
    }
}

/// A list of user ids as stored: 4 bytes each, little-endian.
pub fn encode_ids(ids: &[u32]) -> Value {
    ids.iter().flat_map(|i| i.to_le_bytes()).collect()
}

/// The ids of a stored list (a trailing partial id is ignored).
pub fn decode_ids(v: &[u8]) -> impl Iterator<Item = u32> + '_ {
    v.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
}

/// Appends `id` to a stored list, keeping the newest [`LIST_LEN`] and no duplicate.
fn append_id(list: Option<&Value>, id: u32) -> Value {
    let mut ids: Vec<u32> = list
        .map(|v| decode_ids(v).filter(|&x| x != id).collect())
        .unwrap_or_default();
    ids.push(id);
    let from = ids.len().saturating_sub(LIST_LEN);
    encode_ids(&ids[from..])
}

/// Draws the mix for clients whose home is one partition.
pub struct TwitterGen {
    cfg: TwitterConfig,
    rng: SmallRng,
}

impl TwitterGen {
    /// A generator seeded with `seed`.
    pub fn new(cfg: TwitterConfig, seed: u64) -> TwitterGen {
        assert!(cfg.users >= 2 * cfg.partitions as u64);
        TwitterGen {
            cfg,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    fn user_in(&mut self, p: PartitionId) -> u64 {
        let n = self.cfg.partitions as u64;
        let count = self.cfg.users / n + u64::from((p as u64) < self.cfg.users % n);
        self.rng.random_range(0..count) * n + p as u64
    }

    /// The next transaction of a client at partition `home`: a user of that partition acts.
    pub fn next(&mut self, home: PartitionId) -> TwitterTxn {
        let u = self.user_in(home);
        let roll = self.rng.random_range(0..100u32);
        let op = if roll < 50 {
            Op::Timeline
        } else if roll < 90 {
            let len = self.rng.random_range(10..=50usize);
            let text = (0..len)
                .map(|_| self.rng.random_range(b'a'..=b'z'))
                .collect();
            Op::Post(text)
        } else {
            let cross = self.cfg.partitions > 1 && self.rng.random_bool(self.cfg.follow_cross);
            let v = loop {
                let p = if cross {
                    let o = self.rng.random_range(0..self.cfg.partitions as u16 - 1);
                    if o >= home { o + 1 } else { o }
                } else {
                    home
                };
                let v = self.user_in(p);
                if v != u {
                    break v;
                }
            };
            Op::Follow(v)
        };
        TwitterTxn {
            cfg: self.cfg,
            user: u,
            op,
            round: 0,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Timeline,
    Post(Vec<u8>),
    Follow(u64),
}

/// One Twitter-like transaction.
#[derive(Clone, Debug)]
pub struct TwitterTxn {
    cfg: TwitterConfig,
    user: u64,
    op: Op,
    round: u32,
}

impl Logic for TwitterTxn {
    fn next_reads(&mut self, tx: &Transaction, out: &mut Vec<Key>) {
        let round = self.round;
        self.round += 1;
        let c = self.cfg;
        match (&self.op, round) {
            (Op::Timeline, 0) => out.push(c.key(self.user, Field::Producers)),
            (Op::Timeline, 1) => {
                if let Some(list) = tx.value_of(c.key(self.user, Field::Producers)) {
                    out.extend(decode_ids(list).map(|v| c.key(v as u64, Field::Posts)));
                }
            }
            (Op::Post(_), 0) => out.push(c.key(self.user, Field::Posts)),
            (Op::Follow(v), 0) => {
                out.push(c.key(self.user, Field::Producers));
                out.push(c.key(*v, Field::Consumers));
            }
            _ => {}
        }
    }

    fn write(&mut self, tx: &mut Transaction) {
        let c = self.cfg;
        match &self.op {
            Op::Timeline => {}
            Op::Post(text) => {
                let key = c.key(self.user, Field::Posts);
                let mut posts: Vec<&[u8]> = tx
                    .value_of(key)
                    .map(|v| v.split(|&b| b == b'\n').collect())
                    .unwrap_or_default();
                posts.push(text);
                let from = posts.len().saturating_sub(RECENT_POSTS);
                let value = posts[from..].join(&b'\n');
                tx.write(key, value);
            }
            Op::Follow(v) => {
                let producers = c.key(self.user, Field::Producers);
                let consumers = c.key(*v, Field::Consumers);
                let p = append_id(tx.value_of(producers), *v as u32);
                let q = append_id(tx.value_of(consumers), self.user as u32);
                tx.write(producers, p);
                tx.write(consumers, q);
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self.op {
            Op::Timeline => "timeline",
            Op::Post(_) => "post",
            Op::Follow(_) => "follow",
        }
    }
}
