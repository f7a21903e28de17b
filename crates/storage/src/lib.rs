//! Storage layer of phasedb: schemas with typed fixed-width columns grouped into column groups, tables of
//! records with stable addresses, found by a hash index, an ordered index (a B+-tree with optimistic
//! lock coupling) or both, and epoch-based reclamation of unlinked records.
//!
//! Storage knows nothing of transactions. Every column group of every record carries one value of a
//! metadata type `M` chosen by the layer above (a concurrency-control protocol); storage only allocates
//! it, hands out references to it and drops it.

#[cfg(target_endian = "big")]
compile_error!("phasedb stores rows as little-endian words");

mod arena;
mod btree;
#[cfg(test)]
#[path = "btree/tests.rs"]
mod btree_tests;
mod hash_index;
mod huge_pieces;
mod key;
mod mapping;
pub mod ordered;
mod ordered_index;
mod prefault;
mod prefetch;
mod record;
mod row;
mod schema;
mod sync;
mod table;

pub use btree::BTree;
pub use crossbeam_epoch::{Guard, pin};
pub use hash_index::HashIndex;
pub use key::CompositeKey;
pub use ordered_index::OrderedIndex;
pub use record::{RecordLayout, RecordPtr};
pub use row::{RowBuf, RowView, Value, merge_columns, move_columns};
pub use schema::{
    Column, ColumnId, ColumnType, Group, Schema, SchemaBuilder, SchemaError, WordSpan,
};
pub use table::{Indexes, InsertOutcome, Table, TableId, TableSpec};
