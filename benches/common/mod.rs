//! What the benches share.
#![allow(dead_code)]

pub mod fixtures;

use std::path::PathBuf;

/// A free port on 127.0.0.1, for a guardwire child process to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:`); 0 when it cannot be read.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The guardwire binary the end-to-end benches start: this build's, or the one `GUARDWIRE_BIN`
/// names (another build, to compare two in alternating runs on the same machine).
pub fn guardwire_bin() -> PathBuf {
    std::env::var_os("GUARDWIRE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_guardwire")))
}
