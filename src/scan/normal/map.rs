//! The normalised view's map back to the raw text: runs of view bytes and the raw span each
//! came from, so a match in the view blocks, holds back and redacts the raw bytes.

use super::{Normalizer, Run};

impl Normalizer {
    /// Appends `len` view bytes that came from raw `raw..raw_end`.
    pub(super) fn push_run(&mut self, raw: u64, raw_end: u64, exact: bool, len: u64) {
        let out = self.out_len;
        self.out_len += len;
        // The raw end never goes back: what comes after an aside but waited from before it
        // (a `_` run, a tag read as text) maps to the end of the aside too.
        let (raw_end, exact) = match self.runs.back() {
            Some(last) if last.raw_end > raw_end => (last.raw_end, false),
            _ => (raw_end, exact),
        };
        if let Some(last) = self.runs.back_mut() {
            if exact && last.exact && last.raw_end == raw {
                last.raw_end = raw_end;
                return;
            }
            // More view characters of the same raw character (a decomposition).
            if !exact && !last.exact && last.raw == raw && last.raw_end == raw_end {
                return;
            }
        }
        self.runs.push_back(Run {
            out,
            raw,
            raw_end,
            exact,
        });
    }

    /// The run holding view byte `pos`, if the view reaches it.
    fn run_at(&self, pos: u64) -> Option<&Run> {
        if pos >= self.out_len {
            return None;
        }
        let i = self.runs.partition_point(|r| r.out <= pos);
        self.runs.get(i.checked_sub(1)?)
    }

    /// The raw position where view position `pos` starts (a match starting there covers the
    /// whole raw character it came from). At the view's end: the first raw byte not yet in the
    /// view.
    pub fn raw_start(&self, pos: u64) -> u64 {
        match self.run_at(pos) {
            Some(r) if r.exact => r.raw + (pos - r.out),
            Some(r) => r.raw,
            None => self.pending_start().unwrap_or(self.raw_len),
        }
    }

    /// The raw position where a span of the view ending at `end` (exclusive) ends.
    pub fn raw_end(&self, end: u64) -> u64 {
        let Some(last) = end.checked_sub(1) else {
            return self.raw_start(0);
        };
        match self.run_at(last) {
            Some(r) if r.exact => r.raw + (end - r.out),
            Some(r) => r.raw_end,
            None => self.pending_start().unwrap_or(self.raw_len),
        }
    }

    /// View positions before `pos` will not be mapped again (but for the view's last bytes,
    /// which an aside writes again: `aside.rs`).
    pub fn prune(&mut self, pos: u64) {
        let pos = pos.min(
            self.out_len
                .saturating_sub(super::aside::RECENT_BYTES as u64 * 2),
        );
        let i = self.runs.partition_point(|r| r.out <= pos);
        if i > 1 {
            self.runs.drain(..i - 1);
        }
    }
}
