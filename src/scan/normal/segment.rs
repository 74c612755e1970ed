//! `full`: line breaks next to a zero-width space, as a browser lays them out. CSS Text
//! (§4.1.2, which Chromium and Firefox follow) removes a segment break — a line break in the
//! source — when the character before or after it (the spaces and tabs around it removed
//! first) is U+200B ZERO WIDTH SPACE: `fru` + line break + U+200B + `it` shows as `fruit`,
//! where every other line break shows as a space. So a white space run holding a line break
//! waits for the character after it, and one that starts after a U+200B does too; the run is
//! then one space, or nothing when it held a line break with a U+200B on either side.
//!
//! The run waits for one character, decided by the text alone: every split of a text gives
//! the same view.

use super::{Normalizer, Unit};

/// A white space run waiting for the character after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    /// The run's first character, as the space it shows as.
    space: Unit,
    /// It holds a line break.
    line_break: bool,
    /// It came right after a U+200B.
    after_zwsp: bool,
}

const ZWSP: char = '\u{200b}';

impl Normalizer {
    /// One character before the text stages (`full` only): true when this stage took it (a
    /// space, tab or line break of a waiting run, or the U+200B that removes one).
    pub(super) fn segment_char(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) -> bool {
        let collapsible = c == ' ' || c == '\t';
        let line_break = c == '\n' || c == '\r';
        if let Some(p) = &mut self.pending_space {
            if collapsible {
                return true;
            }
            if line_break {
                p.line_break = true;
                return true;
            }
            let p = *p;
            self.pending_space = None;
            self.after_zwsp = c == ZWSP;
            if p.line_break && (p.after_zwsp || c == ZWSP) {
                // Removed: the U+200B (ignorable) goes on to the rest of the view.
                return false;
            }
            self.starter(p.space, out);
            return false;
        }
        if line_break || (collapsible && self.after_zwsp) {
            self.pending_space = Some(Pending {
                space: Unit {
                    c: ' ',
                    raw,
                    raw_end,
                    exact: false,
                },
                line_break,
                after_zwsp: self.after_zwsp,
            });
            self.after_zwsp = false;
            return true;
        }
        self.after_zwsp = c == ZWSP;
        false
    }

    /// A `<wbr>` was read: a browser lays it out as a U+200B.
    pub(super) fn wbr_read(&mut self) {
        if self.pending_space.is_none() {
            self.after_zwsp = true;
        }
    }

    /// Writes a waiting run (the end of the text, or before something that is not text).
    pub(super) fn end_segment(&mut self, out: &mut String) {
        if let Some(p) = self.pending_space.take() {
            if !(p.line_break && p.after_zwsp) {
                self.starter(p.space, out);
            }
        }
        self.after_zwsp = false;
    }
}
