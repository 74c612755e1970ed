//! What the benches share.
#![allow(dead_code)]

pub mod fixtures;

use std::path::PathBuf;

/// The guardwire binary the end-to-end benches start: this build's, or the one `GUARDWIRE_BIN`
/// names (another build, to compare two in alternating runs on the same machine).
pub fn guardwire_bin() -> PathBuf {
    std::env::var_os("GUARDWIRE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_guardwire")))
}
