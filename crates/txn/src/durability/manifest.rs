//! The data directory's manifest: the format version and the schema the files were written for,
//! so a directory from another schema or version is refused instead of misread.

use std::fs;
use std::path::Path;

use phasedb_storage::Table;

use super::DurabilityError;
use super::checkpoint::write_synced;

/// Version of the on-disk format (blocks, record format, checkpoint layout). Version 2 logs an
/// update's written columns only (partial group images, replayed in TID order per row); a
/// version-1 reader would misapply them. Version 3 checksums blocks with CRC-32 (a version-2
/// reader would find every block corrupt). Version 4 carries a record's columns in column order
/// rather than group by group, so records decode in any grouping (automatic groups), and the
/// manifest marks automatic tables. Directories of another version are refused.
pub(crate) const FORMAT_VERSION: u32 = 4;
/// The manifest's file name.
pub(crate) const NAME: &str = "MANIFEST";
const HEADER: &str = "phasedb data directory";

/// One line per table: name, indexes and columns (name, type, group), in table-id order. A
/// table whose groups are automatic (`auto(table id)`) has `auto` for every column's group: its
/// groups change while it runs, and each checkpoint records those its image was written in.
pub(crate) fn describe<M: Send + Sync>(
    tables: &[Table<M>],
    auto: impl Fn(usize) -> bool,
) -> Vec<String> {
    tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let cols: Vec<String> = (t.schema().columns().iter())
                .map(|c| match auto(i) {
                    true => format!("{}:{:?}@auto", c.name, c.ty),
                    false => format!("{}:{:?}@{}", c.name, c.ty, c.group),
                })
                .collect();
            format!(
                "table {} ordered={} [{}]",
                t.name(),
                t.is_ordered(),
                cols.join(", ")
            )
        })
        .collect()
}

/// Writes the manifest for `tables` into `dir`.
pub(crate) fn write<M: Send + Sync>(
    dir: &Path,
    tables: &[Table<M>],
    auto: impl Fn(usize) -> bool,
) -> Result<(), DurabilityError> {
    let mut text = format!("{HEADER}\nformat {FORMAT_VERSION}\n");
    for line in describe(tables, auto) {
        text.push_str(&line);
        text.push('\n');
    }
    write_synced(&dir.join(NAME), text.as_bytes())
}

/// Checks the manifest of `dir` against `tables`: same format version, same tables.
pub(crate) fn check<M: Send + Sync>(
    dir: &Path,
    tables: &[Table<M>],
    auto: impl Fn(usize) -> bool,
) -> Result<(), DurabilityError> {
    let path = dir.join(NAME);
    let text = fs::read_to_string(&path).map_err(|e| DurabilityError::io("read", &path, e))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(DurabilityError::NotADataDirectory(dir.to_path_buf()));
    }
    let format = lines.next().and_then(|l| l.strip_prefix("format "));
    if format != Some(&FORMAT_VERSION.to_string()) {
        return Err(DurabilityError::Version {
            dir: dir.to_path_buf(),
            found: format.unwrap_or("none").to_string(),
            expected: FORMAT_VERSION,
        });
    }
    let found: Vec<&str> = lines.collect();
    let expected = describe(tables, auto);
    if found.len() != expected.len() {
        return Err(DurabilityError::Schema {
            dir: dir.to_path_buf(),
            detail: format!(
                "it holds {} tables, this database has {}",
                found.len(),
                expected.len()
            ),
        });
    }
    for (f, e) in found.iter().zip(&expected) {
        if f != e {
            return Err(DurabilityError::Schema {
                dir: dir.to_path_buf(),
                detail: format!("it has `{f}` where this database has `{e}`"),
            });
        }
    }
    Ok(())
}
