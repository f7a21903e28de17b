//! `phasedb bench --history FILE`: the recorded history of a run, in a format Jepsen's Elle reads
//! or in phasedb's own JSON (`docs/history.md`).

use std::io::Write;
use std::path::Path;

use clap::ValueEnum;
use phasedb_check::{
    ListAppendHistory, to_elle_edn, to_elle_list_append_edn_within, with_observer,
};
use phasedb_workloads::BenchResult;

/// The formats `--history-format` names.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HistoryFormat {
    /// Elle's list-append EDN: from the values the reads returned where the workload records them
    /// (append), else from the engine's version chains, with a final read of every item.
    #[default]
    ElleListAppend,
    /// Elle's rw-register EDN from the engine's history (versions as values).
    ElleRwRegister,
    /// phasedb's JSON: the engine's history, split operations and merges included, and the values
    /// read where the workload records them.
    Json,
}

/// The version of the JSON layout (`docs/history.md`).
pub const JSON_VERSION: u32 = 1;

/// Most versions the list-append export of an engine history may list in its reads (some gigabytes
/// of text): every read lists its item's chain from the start, so hot items read often (counters)
/// make it grow with the square of their chains.
const LIST_APPEND_LIMIT: u64 = 1 << 28;

/// Writes the history of `result` (and the `observed` one, if the workload recorded it) to `path`.
pub fn write(
    path: &Path,
    format: HistoryFormat,
    workload: &str,
    result: &BenchResult,
    observed: Option<&ListAppendHistory>,
) -> std::io::Result<()> {
    let text = match format {
        HistoryFormat::ElleListAppend => match observed {
            Some(o) => o.to_elle_edn(),
            None => {
                to_elle_list_append_edn_within(&with_observer(&result.history), LIST_APPEND_LIMIT)
                    .ok_or_else(|| {
                    std::io::Error::other(
                        "the engine's version chains are too long for a list-append export (its \
                         reads would list more than 2^28 versions): use a shorter run, or \
                         --history-format elle-rw-register or json",
                    )
                })?
            }
        },
        HistoryFormat::ElleRwRegister => to_elle_edn(&result.history),
        HistoryFormat::Json => format!(
            "{{\"format\":\"phasedb-history\",\"version\":{JSON_VERSION},\"workload\":{},\
             \"protocol\":{},\"engine\":{},\"observed\":{}}}\n",
            serde_json::to_string(workload).expect("a string serializes"),
            serde_json::to_string(result.protocol).expect("a string serializes"),
            result.history.to_json(),
            observed.map_or_else(|| "null".into(), ListAppendHistory::to_json),
        ),
    };
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    file.write_all(text.as_bytes())?;
    file.flush()
}
