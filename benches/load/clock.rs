//! The clock shared by the mock and the client (chunk transit times), and the marks in bodies.

use std::sync::OnceLock;
use std::time::Instant;

pub(super) fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

pub(super) fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

/// Placeholder the mock overwrites with the send time (16 decimal digits of ns since `epoch`).
pub(super) const STAMP: &str = "@T0000000000000000";
pub(super) const STAMP_DIGITS: usize = 16;
pub(super) const HOLD_MARK: &str = "gw-hold";
/// A request naming this gets the flood answer: megabytes, as fast as the proxy takes them.
pub(super) const FLOOD_MARK: &str = "gw-flood";
