//! The Doppel paper's LIKE application: users like pages. A write transaction records the like in
//! the user's row and adds one to the page's like count (last, so OCC's window on the popular count
//! is short); a read transaction reads a page's count and then a user's last like, in the paper's
//! order (so under Doppel a read of a split page is stashed before it fetched the user's row from
//! memory). Each first issues cache prefetches so its misses overlap: a write, of the page's index
//! slot and the user's slot and row; a read, of the user's index slot only, which costs a stashed
//! read nothing. Pages are chosen with a zipfian distribution, so under skew a few popular pages' counts
//! take most of the increments (what Doppel splits), while user rows do not conflict.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use phasedb_keys::Zipf;
use phasedb_storage::{ColumnType, Schema, TableSpec};
use phasedb_txn::{Database, MAX_WORKERS, Protocol, TableId, TxResult, Worker, columns};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::Workload;

/// LIKE settings.
#[derive(Clone, Debug)]
pub struct LikeConfig {
    pub users: u64,
    pub pages: u64,
    /// Zipfian skew of page choice (0: uniform).
    pub alpha: f64,
    /// Share of write (like) transactions.
    pub write_ratio: f64,
}

impl Default for LikeConfig {
    fn default() -> Self {
        LikeConfig {
            users: 1_000_000,
            pages: 1_000_000,
            alpha: 1.4,
            write_ratio: 0.5,
        }
    }
}

impl LikeConfig {
    /// Checks the settings, with a message fit for a command-line user.
    pub fn validate(&self) -> Result<(), String> {
        if self.users == 0 || self.pages == 0 {
            return Err("--users and --pages must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return Err("--write-ratio must be between 0 and 1".into());
        }
        Zipf::check_skew("--alpha", self.alpha)
    }
}

/// The LIKE workload.
pub struct Like {
    cfg: LikeConfig,
    users: TableId,
    pages: TableId,
    zipf: Option<Zipf>,
    /// Committed likes per thread, to check the counts afterwards.
    likes: Vec<CachePadded<AtomicU64>>,
}

/// A thread's generator state.
pub struct LikeThread {
    rng: SmallRng,
    index: usize,
}

/// Columns of `users`.
const LAST_PAGE: usize = 0;
const USER_LIKES: usize = 1;
/// Column of `pages`.
const PAGE_LIKES: usize = 0;

/// Transaction types.
const READ: usize = 0;
const WRITE: usize = 1;

impl Like {
    /// A workload with settings `cfg` (validated by the caller).
    pub fn new(cfg: LikeConfig) -> Like {
        let zipf = (cfg.alpha > 0.0).then(|| Zipf::new(cfg.pages, cfg.alpha));
        Like {
            cfg,
            users: 0,
            pages: 0,
            zipf,
            likes: (0..MAX_WORKERS).map(|_| CachePadded::default()).collect(),
        }
    }

    fn page(&self, rng: &mut SmallRng) -> u64 {
        match &self.zipf {
            Some(z) => z.sample(rng),
            None => rng.random_range(0..self.cfg.pages),
        }
    }
}

impl Workload for Like {
    type Thread = LikeThread;

    fn name(&self) -> &'static str {
        "like"
    }

    fn txn_types(&self) -> Vec<&'static str> {
        vec!["read", "write"]
    }

    fn setup<P: Protocol>(&mut self, db: &mut Database<P>) {
        let users = Schema::builder()
            .column("last_page", ColumnType::U64, 0)
            .column("likes", ColumnType::I64, 0)
            .build()
            .expect("the users schema is valid");
        let pages = Schema::builder()
            .column("likes", ColumnType::I64, 0)
            .build()
            .expect("the pages schema is valid");
        self.users = db.create_table(TableSpec::new("users", users, self.cfg.users as usize));
        self.pages = db.create_table(TableSpec::new("pages", pages, self.cfg.pages as usize));
        for u in 0..self.cfg.users {
            db.load(self.users, u, |r| r.set_u64(LAST_PAGE, u64::MAX))
                .expect("user ids are distinct");
        }
        for p in 0..self.cfg.pages {
            db.load(self.pages, p, |_| {})
                .expect("page ids are distinct");
        }
    }

    fn thread(&self, index: usize, seed: u64) -> LikeThread {
        LikeThread {
            rng: SmallRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x51_7cc1_b727)),
            index,
        }
    }

    fn rng<'a>(&self, thread: &'a mut LikeThread) -> &'a mut SmallRng {
        &mut thread.rng
    }

    fn run_one<P: Protocol>(
        &self,
        th: &mut LikeThread,
        worker: &mut Worker<'_, P>,
    ) -> TxResult<()> {
        let write = th.rng.random_bool(self.cfg.write_ratio);
        let user = th.rng.random_range(0..self.cfg.users);
        let page = self.page(&mut th.rng);
        let (users, pages) = (self.users, self.pages);
        if write {
            worker.execute(WRITE, |tx| {
                tx.prefetch_index(pages, std::iter::once(page));
                tx.prefetch(users, std::iter::once(user));
                tx.update(users, user, |r| r.set_u64(LAST_PAGE, page))?;
                tx.add(users, user, USER_LIKES, 1)?;
                tx.add(pages, page, PAGE_LIKES, 1).map(|_| ())
            })?;
            let done = &self.likes[th.index % MAX_WORKERS];
            done.store(done.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        } else {
            worker.execute(READ, |tx| {
                tx.prefetch_index(users, std::iter::once(user));
                let likes = tx
                    .get_columns(pages, page, columns(&[PAGE_LIKES]))?
                    .map(|r| r.i64(PAGE_LIKES));
                let last = tx
                    .get_columns(users, user, columns(&[LAST_PAGE]))?
                    .map(|r| r.u64(LAST_PAGE));
                std::hint::black_box((last, likes));
                Ok(())
            })?;
        }
        Ok(())
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let expected: u64 = self.likes.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        let mut page_sum = 0i64;
        let mut negative = 0u64;
        db.for_each_row_quiescent(self.pages, |_, row| {
            let n = row.i64(PAGE_LIKES);
            page_sum += n;
            negative += (n < 0) as u64;
        });
        let mut user_sum = 0i64;
        let mut dangling = 0u64;
        db.for_each_row_quiescent(self.users, |_, row| {
            user_sum += row.i64(USER_LIKES);
            let last = row.u64(LAST_PAGE);
            dangling += (last != u64::MAX && last >= self.cfg.pages) as u64;
        });
        if page_sum as u64 != expected || user_sum as u64 != expected {
            return Err(format!(
                "{expected} likes committed, but pages count {page_sum} and users {user_sum}"
            ));
        }
        if negative > 0 || dangling > 0 {
            return Err(format!(
                "{negative} pages with negative counts, {dangling} users liking no page"
            ));
        }
        Ok(())
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("users", self.cfg.users.to_string()),
            ("pages", self.cfg.pages.to_string()),
            ("alpha", self.cfg.alpha.to_string()),
            ("write_ratio", self.cfg.write_ratio.to_string()),
        ]
    }
}
