//! A simulated process of STAR's simulator tests: a STAR node or a client endpoint, so nodes and
//! clients share one simulator.

use phasedb_dist::star::{StarMsg, StarNode};
use phasedb_net::{Addr, Node, Transport};

use crate::accounts::Accounts;
use crate::client::Client;

/// A simulated process: a STAR node or a client endpoint.
pub enum Actor<'w> {
    Star(Box<StarNode<'w, Accounts>>),
    Client(Box<Client<'w>>),
}

impl<'w> Actor<'w> {
    pub fn star(&self) -> &StarNode<'w, Accounts> {
        match self {
            Actor::Star(s) => s,
            Actor::Client(_) => panic!("not a node"),
        }
    }

    pub fn star_mut(&mut self) -> &mut StarNode<'w, Accounts> {
        match self {
            Actor::Star(s) => s,
            Actor::Client(_) => panic!("not a node"),
        }
    }

    pub fn client(&self) -> &Client<'w> {
        match self {
            Actor::Client(c) => c,
            Actor::Star(_) => panic!("not a client"),
        }
    }
}

impl Node for Actor<'_> {
    type Msg = StarMsg;

    fn on_start<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        match self {
            Actor::Star(s) => s.on_start(net),
            Actor::Client(c) => c.on_start(net),
        }
    }

    fn on_message<T: Transport<StarMsg>>(&mut self, net: &mut T, from: Addr, msg: StarMsg) {
        match self {
            Actor::Star(s) => s.on_message(net, from, msg),
            Actor::Client(c) => c.on_message(net, from, msg),
        }
    }

    fn on_tick<T: Transport<StarMsg>>(&mut self, net: &mut T) {
        match self {
            Actor::Star(s) => s.on_tick(net),
            Actor::Client(c) => c.on_tick(net),
        }
    }
}
