//! The metrics of the body capture (`capture:`): records written and records dropped, by why.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CaptureLabels {
    /// One of [`CaptureMetrics::RESULTS`].
    pub result: &'static str,
}

pub struct CaptureMetrics {
    pub records: Family<CaptureLabels, Counter>,
    pub bytes: Counter,
}

impl CaptureMetrics {
    /// `written`; dropped: `queue_full` (the writer is behind), `too_large` (over
    /// `capture.max_record_bytes`), `unreadable` (a body that is not JSON or text),
    /// `files_full` (`max_files: 0` and the file is full), `write_error`.
    pub const RESULTS: [&'static str; 6] = [
        "written",
        "queue_full",
        "too_large",
        "unreadable",
        "files_full",
        "write_error",
    ];

    pub(super) fn register(registry: &mut Registry) -> CaptureMetrics {
        let m = CaptureMetrics {
            records: Family::default(),
            bytes: Counter::default(),
        };
        for result in Self::RESULTS {
            let _ = m.records.get_or_create(&CaptureLabels { result });
        }
        registry.register(
            "capture_records",
            "Exchanges of the body capture (capture.path), by result: written, or dropped (queue_full, too_large, unreadable, files_full, write_error)",
            m.records.clone(),
        );
        registry.register(
            "capture_bytes",
            "Bytes the body capture wrote",
            m.bytes.clone(),
        );
        m
    }

    /// Counts one record by `result` (one of [`CaptureMetrics::RESULTS`]).
    pub fn count(&self, result: &'static str) {
        self.records.get_or_create(&CaptureLabels { result }).inc();
    }
}
