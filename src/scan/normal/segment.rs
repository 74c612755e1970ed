//! `full`: line breaks next to a zero-width space, as a browser lays them out. CSS Text
//! (§4.1.2, which Chromium and Firefox follow) removes a segment break — a line break in the
//! source — when the character before or after it (the spaces and tabs around it removed
//! first) is U+200B ZERO WIDTH SPACE (or a `<wbr>`, which a browser lays out as one): `fru` +
//! line break + U+200B + `it` shows as `fruit`, where every other line break shows as a space.
//!
//! The view writes the line break as a space at once (a stream never waits on it); when the
//! U+200B turns up on the other side, the browser's reading — the view before the white space
//! joined to the text after it — is recorded as an aside (`join.rs`).

use super::Normalizer;

const ZWSP: char = '\u{200b}';

impl Normalizer {
    /// One character before the text stages (`full` only).
    pub(super) fn segment_char(&mut self, c: char, raw: u64) {
        let collapsible = c == ' ' || c == '\t';
        let line_break = c == '\n' || c == '\r';
        if line_break {
            if self.after_zwsp {
                self.join_across_break(raw);
            }
            self.after_break = true;
        } else if c == ZWSP {
            if self.after_break {
                self.join_across_break(raw);
            }
            self.after_break = false;
            self.after_zwsp = true;
        } else if !collapsible {
            self.after_break = false;
            self.after_zwsp = false;
        }
    }

    /// A `<wbr>` was read: a browser lays it out as a U+200B.
    pub(super) fn wbr_read(&mut self, raw: u64) {
        self.segment_char(ZWSP, raw);
    }
}
