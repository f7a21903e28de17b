//! The server's tables: names, definitions and which ids were dropped.
//!
//! The engine's tables are created before its workers start (`Database::create_table` takes
//! `&mut`), and their ids index every worker's sets, so the server changes them only while its
//! engine threads are paused (see [`crate::engine`]), and a dropped table keeps its id: it is
//! marked dropped here (no operation reaches it again, its name is free) and its rows are deleted
//! by transactions, which frees them through the engine's usual reclamation.

use std::collections::HashMap;

use phasedb_proto::{AUTO_GROUP, ColumnDef, ColumnKind, TableDef, TableInfo};
use phasedb_storage::{ColumnType, Schema, TableId, TableSpec};

/// The most rows a table definition may ask to be sized for (the hash index is allocated for it).
pub const MAX_CAPACITY: u64 = 1 << 26;
/// The most bytes a row may have.
pub const MAX_ROW_BYTES: usize = 64 << 10;

/// Tables by id and name.
#[derive(Default)]
pub struct Catalog {
    defs: Vec<Option<TableDef>>,
    by_name: HashMap<String, TableId>,
}

impl Catalog {
    /// The definition of live table `id`.
    pub fn get(&self, id: u32) -> Result<&TableDef, String> {
        match self.defs.get(id as usize) {
            Some(Some(def)) => Ok(def),
            Some(None) => Err(format!("table {id} was dropped")),
            None => Err(format!("no table {id}")),
        }
    }

    /// The live table named `name`.
    pub fn find(&self, name: &str) -> Option<TableInfo> {
        let id = *self.by_name.get(name)?;
        Some(TableInfo {
            id,
            def: self.get(id).ok()?.clone(),
        })
    }

    /// Every live table, by id.
    pub fn list(&self) -> Vec<TableInfo> {
        self.defs
            .iter()
            .enumerate()
            .filter_map(|(id, d)| {
                d.as_ref().map(|def| TableInfo {
                    id: id as u32,
                    def: def.clone(),
                })
            })
            .collect()
    }

    /// Records table `id` (the engine's next id) as defined by `def`.
    pub fn add(&mut self, id: TableId, def: TableDef) {
        assert_eq!(
            id as usize,
            self.defs.len(),
            "catalog follows the engine's ids"
        );
        self.by_name.insert(def.name.clone(), id);
        self.defs.push(Some(def));
    }

    /// The ids of the dropped tables.
    pub fn dropped(&self) -> Vec<TableId> {
        (0..self.defs.len() as TableId)
            .filter(|&id| self.defs[id as usize].is_none())
            .collect()
    }

    /// Marks table `name` dropped; its id, if it was live.
    pub fn drop_table(&mut self, name: &str) -> Option<TableId> {
        let id = self.by_name.remove(name)?;
        self.defs[id as usize] = None;
        Some(id)
    }
}

/// The engine's table spec for `def`, or why it is not valid.
pub fn spec(def: &TableDef, catalog: &Catalog) -> Result<TableSpec, String> {
    if def.name.is_empty() || def.name.len() > 128 {
        return Err("a table name has 1 to 128 bytes".into());
    }
    if catalog.find(&def.name).is_some() {
        return Err(format!("table {} exists", def.name));
    }
    if def.capacity > MAX_CAPACITY {
        return Err(format!("capacity is at most {MAX_CAPACITY} rows"));
    }
    let mut b = Schema::builder();
    let mut bytes = 0usize;
    for c in &def.columns {
        let ty = match c.kind {
            ColumnKind::U64 => ColumnType::U64,
            ColumnKind::I64 => ColumnType::I64,
            ColumnKind::F64 => ColumnType::F64,
            ColumnKind::Fixed(n) => ColumnType::Fixed(n),
            ColumnKind::Bounded(n) => ColumnType::Bounded(n),
            ColumnKind::Tuple(n) => ColumnType::Tuple(n),
            ColumnKind::TopK { k, n } => ColumnType::TopK { k, n },
        };
        bytes += ty.width();
        b = match c.group {
            AUTO_GROUP => b.auto_column(&c.name, ty),
            g => b.column(&c.name, ty, g as usize),
        };
    }
    if bytes > MAX_ROW_BYTES {
        return Err(format!("a row has at most {MAX_ROW_BYTES} bytes"));
    }
    if def.columns.len() > 64 {
        return Err("a table has at most 64 columns".into());
    }
    if def
        .columns
        .iter()
        .any(|c| c.group != AUTO_GROUP && c.group as usize >= Schema::MAX_GROUPS)
    {
        return Err(format!(
            "column groups are numbered below {}",
            Schema::MAX_GROUPS
        ));
    }
    let schema = b.build().map_err(|e| e.to_string())?;
    let spec = TableSpec::new(&def.name, schema, def.capacity.max(16) as usize);
    Ok(if def.ordered { spec.ordered() } else { spec })
}

/// The definition of an engine table created by a stored procedure's setup (YCSB's, TPC-C's).
pub fn def_of(name: &str, schema: &Schema, ordered: bool) -> TableDef {
    TableDef {
        name: name.to_string(),
        columns: schema
            .columns()
            .iter()
            .map(|c| ColumnDef {
                name: c.name.clone(),
                kind: match c.ty {
                    ColumnType::U64 => ColumnKind::U64,
                    ColumnType::I64 => ColumnKind::I64,
                    ColumnType::F64 => ColumnKind::F64,
                    ColumnType::Bounded(n) => ColumnKind::Bounded(n),
                    ColumnType::Tuple(n) => ColumnKind::Tuple(n),
                    ColumnType::TopK { k, n } => ColumnKind::TopK { k, n },
                    other => ColumnKind::Fixed(other.width() as u16),
                },
                group: c.group as u8,
            })
            .collect(),
        capacity: 0,
        ordered,
    }
}
