//! End-to-end tests of `phasedb serve` over loopback, through the Rust client (one binary, a
//! module per concern).

mod connections;
mod durable;
mod frames;
mod interactive;
mod killed;
mod one_shot;
mod ordered;
mod procedures;

use phasedb_client::{Client, ColumnDef, ColumnKind, Op, OpResult, TableDef, TableInfo, Value};
use phasedb_server::{Server, ServerConfig};

/// A server on a free loopback port.
pub fn server(protocol: &str, token: Option<&str>) -> Server {
    Server::start(&ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        protocol: protocol.into(),
        threads: 2,
        token: token.map(str::to_string),
        max_frame: 1 << 20,
        ..ServerConfig::default()
    })
    .expect("server starts")
}

/// A fresh directory under the system's temporary one, removed at the end.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("phasedb-serve-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A durable server of `protocol` on a free loopback port, or the engine's refusal.
pub fn durable_server(protocol: &str, dir: &std::path::Path) -> Result<Server, String> {
    Server::start(&ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        protocol: protocol.into(),
        threads: 2,
        durability: Some(phasedb_txn::Durability::new(dir)),
        ..ServerConfig::default()
    })
}

pub fn connect(s: &Server) -> Client {
    Client::connect(s.addr(), None).expect("connects")
}

/// `accounts(balance i64 [group 0], name bounded(16) [group 1])`, ordered.
pub fn accounts(c: &mut Client) -> TableInfo {
    c.create_table(accounts_def()).expect("table created")
}

/// The definition [`accounts`] creates.
pub fn accounts_def() -> TableDef {
    TableDef {
        name: "accounts".into(),
        columns: vec![
            ColumnDef {
                name: "balance".into(),
                kind: ColumnKind::I64,
                group: 0,
            },
            ColumnDef {
                name: "name".into(),
                kind: ColumnKind::Bounded(16),
                group: 1,
            },
        ],
        capacity: 1024,
        ordered: true,
    }
}

/// The balance of row `key`, `None` if absent.
pub fn balance(c: &mut Client, table: u32, key: u64) -> Option<i64> {
    match &c
        .execute(vec![Op::Get {
            table,
            key,
            columns: vec![0],
        }])
        .unwrap()[0]
    {
        OpResult::Row(Some(v)) => match v[0] {
            Value::I64(b) => Some(b),
            ref other => panic!("balance is {other:?}"),
        },
        OpResult::Row(None) => None,
        other => panic!("get returned {other:?}"),
    }
}

pub fn put(table: u32, key: u64, b: i64) -> Op {
    Op::Put {
        table,
        key,
        values: vec![(0, Value::I64(b))],
    }
}
