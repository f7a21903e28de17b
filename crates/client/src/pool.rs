//! A pool of blocking connections shared by threads.

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};

use parking_lot::Mutex;

use crate::{Client, Result};

/// Connections to one server, opened on demand and kept for reuse (at most `max_idle` idle).
pub struct Pool {
    addr: SocketAddr,
    token: Option<String>,
    idle: Mutex<Vec<Client>>,
    max_idle: usize,
}

impl Pool {
    /// A pool of connections to `addr`, keeping at most `max_idle` idle ones.
    pub fn new(addr: SocketAddr, token: Option<String>, max_idle: usize) -> Pool {
        Pool {
            addr,
            token,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// An idle connection, or a new one.
    pub fn get(&self) -> Result<Pooled<'_>> {
        let idle = self.idle.lock().pop();
        let client = match idle {
            Some(c) => c,
            None => Client::connect(self.addr, self.token.as_deref())?,
        };
        Ok(Pooled {
            pool: self,
            client: Some(client),
        })
    }

    /// Idle connections.
    pub fn idle(&self) -> usize {
        self.idle.lock().len()
    }
}

/// A connection taken from a [`Pool`]; it goes back when dropped (call [`Pooled::discard`] after an
/// I/O error so a broken connection is not reused).
pub struct Pooled<'p> {
    pool: &'p Pool,
    client: Option<Client>,
}

impl Pooled<'_> {
    /// Closes the connection instead of returning it to the pool.
    pub fn discard(mut self) {
        self.client = None;
    }
}

impl Deref for Pooled<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("present until dropped")
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let mut idle = self.pool.idle.lock();
            if idle.len() < self.pool.max_idle {
                idle.push(c);
            }
        }
    }
}
