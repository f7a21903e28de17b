//! The TCP runtime on 127.0.0.1: messages arrive in order across batches, and the injected delay
//! delays them.

use std::time::{Duration, Instant};

use phasedb_net::tcp::{TcpOptions, run_blocking};
use phasedb_net::{Addr, CLIENT_ADDR_BASE, Node, Transport};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Msg {
    Echo(u64),
    Back(u64),
}

/// Echoes every message back to its sender.
struct Echo;

impl Node for Echo {
    type Msg = Msg;
    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        if let Msg::Echo(n) = msg {
            net.send(from, Msg::Back(n));
        }
    }
    fn on_tick<T: Transport<Msg>>(&mut self, _: &mut T) {}
}

/// Sends `total` messages in bursts and checks they come back in order.
struct Sender {
    total: u64,
    sent: u64,
    received: Vec<u64>,
    first_reply_after: Option<Duration>,
    started: Option<Instant>,
}

impl Node for Sender {
    type Msg = Msg;
    fn on_start<T: Transport<Msg>>(&mut self, net: &mut T) {
        self.started = Some(Instant::now());
        self.burst(net);
    }
    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, _: Addr, msg: Msg) {
        if let Msg::Back(n) = msg {
            self.first_reply_after
                .get_or_insert_with(|| self.started.unwrap().elapsed());
            self.received.push(n);
            if self.received.len() as u64 == self.sent {
                self.burst(net);
            }
        }
    }
    fn on_tick<T: Transport<Msg>>(&mut self, _: &mut T) {}
    fn is_done(&self) -> bool {
        self.received.len() as u64 == self.total
    }
}

impl Sender {
    fn new(total: u64) -> Self {
        Sender {
            total,
            sent: 0,
            received: Vec::new(),
            first_reply_after: None,
            started: None,
        }
    }
    fn burst<T: Transport<Msg>>(&mut self, net: &mut T) {
        for _ in 0..1000.min(self.total - self.sent) {
            net.send(0, Msg::Echo(self.sent));
            self.sent += 1;
        }
    }
}

fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn echo_round_trip(delay: Duration, total: u64) -> Sender {
    echo_round_trip_polling(delay, Duration::ZERO, total)
}

fn echo_round_trip_polling(delay: Duration, poll: Duration, total: u64) -> Sender {
    let addr = free_addr();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let server = std::thread::spawn(move || {
        let mut opts = TcpOptions::new(0, vec![]);
        opts.listen = Some(addr);
        opts.delay = delay;
        opts.poll = poll;
        run_blocking(&mut Echo, opts, stop_rx)
    });
    let mut client = Sender::new(total);
    let mut opts = TcpOptions::new(CLIENT_ADDR_BASE, vec![(0, addr)]);
    opts.delay = delay;
    opts.poll = poll;
    let (_never, rx) = tokio::sync::watch::channel(false);
    run_blocking(&mut client, opts, rx).unwrap();
    let _ = stop.send(true);
    server.join().unwrap().unwrap();
    client
}

#[test]
fn many_messages_come_back_in_order_through_batched_frames() {
    let c = echo_round_trip(Duration::ZERO, 20_000);
    assert_eq!(c.received.len(), 20_000);
    assert!(
        c.received.windows(2).all(|w| w[0] + 1 == w[1]),
        "replies reordered"
    );
}

#[test]
fn a_polling_loop_delivers_everything_and_still_stops() {
    let c = echo_round_trip_polling(Duration::ZERO, Duration::from_micros(200), 20_000);
    assert_eq!(c.received.len(), 20_000);
    assert!(
        c.received.windows(2).all(|w| w[0] + 1 == w[1]),
        "replies reordered"
    );
}

#[test]
fn the_injected_delay_holds_back_each_direction() {
    let c = echo_round_trip(Duration::from_millis(40), 2000);
    assert_eq!(c.received.len(), 2000);
    let rtt = c.first_reply_after.unwrap();
    assert!(
        rtt >= Duration::from_millis(80),
        "round trip {rtt:?} with 40 ms each way"
    );
}

#[test]
fn a_listener_on_a_taken_port_is_an_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut opts = TcpOptions::new(0, vec![]);
    opts.listen = Some(taken.local_addr().unwrap());
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let err = run_blocking(&mut Echo, opts, rx).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
}

/// Echoes like [`Echo`] and always has work of its own: counts the ticks it is given.
struct BusyEcho {
    ticks: u64,
}

impl Node for BusyEcho {
    type Msg = Msg;
    fn on_message<T: Transport<Msg>>(&mut self, net: &mut T, from: Addr, msg: Msg) {
        if let Msg::Echo(n) = msg {
            net.send(from, Msg::Back(n));
        }
    }
    fn on_tick<T: Transport<Msg>>(&mut self, _: &mut T) {
        self.ticks += 1;
    }
    fn busy(&self) -> bool {
        true
    }
}

#[test]
fn a_busy_node_is_ticked_again_at_once_and_still_answers_and_stops() {
    let addr = free_addr();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let server = std::thread::spawn(move || {
        let mut opts = TcpOptions::new(0, vec![]);
        opts.listen = Some(addr);
        opts.tick = Duration::from_secs(3600);
        let mut node = BusyEcho { ticks: 0 };
        run_blocking(&mut node, opts, stop_rx).map(|()| node.ticks)
    });
    let mut client = Sender::new(2000);
    let (_never, rx) = tokio::sync::watch::channel(false);
    run_blocking(
        &mut client,
        TcpOptions::new(CLIENT_ADDR_BASE, vec![(0, addr)]),
        rx,
    )
    .unwrap();
    let _ = stop.send(true);
    let ticks = server.join().unwrap().unwrap();
    assert_eq!(client.received.len(), 2000);
    assert!(
        ticks > 2,
        "a busy node with an hour-long tick period was ticked {ticks} times"
    );
}
