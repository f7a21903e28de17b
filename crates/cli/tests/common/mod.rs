//! Helpers the CLI's integration tests share.

pub mod quick;
pub mod star;

use std::path::PathBuf;

/// A fresh directory under the system's temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `phasedb-TAG-PID` under the temporary directory, emptied first.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("phasedb-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
