//! Table changes (`CreateTable`, `DropTable`, the setup procedures) applied to a database and its
//! catalog: one path for a running server and for the replay of a data directory's schema.

use phasedb_proto::{ErrorKind, Request, Response, TableInfo};
use phasedb_txn::{Database, Protocol};

use crate::catalog::{self, Catalog};
use crate::procedures::{self, Installed};

fn error(kind: ErrorKind, message: impl Into<String>) -> Response {
    Response::Error {
        kind,
        message: message.into(),
    }
}

/// Whether `req` changes the database's tables (a change a data directory records).
pub fn is_change(req: &Request) -> bool {
    match req {
        Request::CreateTable(_) | Request::DropTable(_) => true,
        Request::Call { name, .. } => procedures::is_setup(name),
        _ => false,
    }
}

/// Whether `req` adds tables to the engine (rather than only marking one dropped).
pub fn adds_tables(req: &Request) -> bool {
    is_change(req) && !matches!(req, Request::DropTable(_))
}

/// Applies change `req` with exclusive access (`load`: a setup procedure loads its tables too).
/// An error response changes nothing. A dropped table's rows are left to the caller to delete.
pub fn apply<P: Protocol>(
    req: &Request,
    db: &mut Database<P>,
    catalog: &mut Catalog,
    installed: &mut Installed,
    load: bool,
) -> Response {
    match req {
        Request::CreateTable(def) => match catalog::spec(def, catalog) {
            Err(m) if catalog.find(&def.name).is_some() => error(ErrorKind::TableExists, m),
            Err(m) => error(ErrorKind::BadTable, m),
            Ok(spec) => {
                let id = db.create_table(spec);
                catalog.add(id, def.clone());
                Response::Table(TableInfo {
                    id,
                    def: def.clone(),
                })
            }
        },
        Request::DropTable(name) => match catalog.drop_table(name) {
            None => error(ErrorKind::NoSuchTable, format!("no table {name}")),
            Some(_) => Response::Done,
        },
        Request::Call { name, args } if procedures::is_setup(name) => {
            match procedures::setup(name, args, db, catalog, installed, load) {
                Ok(v) => Response::Values(v),
                Err(m) => error(ErrorKind::BadCall, m),
            }
        }
        other => error(
            ErrorKind::Malformed,
            format!("{other:?} is not a table change"),
        ),
    }
}
