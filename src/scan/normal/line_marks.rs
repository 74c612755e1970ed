//! `full`: Markdown's block marks at a line's start — a block quote's `>`, a list item's `-`,
//! `+` or `1.`/`1)`, an ATX heading's `#`s, a setext heading's `===`/`---` line — are not text
//! to a reader of the rendered answer: `> forbidden\n> fruit` shows `forbidden fruit` in a
//! quote, `- forbidden\n- fruit` shows the words on lines one after the other. The view reads
//! them as the white space they render as (the line break before them already is), so the
//! words of the lines join as across a soft break. A browser reading the text as HTML shows
//! them; the view then reads more than it shows (a false block at worst, never a pass).
//!
//! A mark is known by the character after it (a list item's `-` by its space, a heading's `#`
//! run by its space or line end, an underline by its line end): the candidate run waits, at
//! most [`MAX_MARK`] characters, decided by the text alone, so every split gives the same view.
//! (`*` is dropped as emphasis, `_` read as emphasis: `markup.rs`. A character a reference or
//! an escape spelled is text, never a mark.)

use super::{Normalizer, Unit};

/// The longest candidate run: nine digits, a delimiter and the white space after a rule.
const MAX_MARK: usize = 16;

/// The line state for block marks.
#[derive(Debug, Clone)]
pub(super) struct LineMarks {
    /// At a line's start: only white space and marks read on it so far.
    pub(super) at_start: bool,
    /// A candidate mark waiting for the character that decides it.
    pub(super) pending: Vec<Unit>,
}

impl Default for LineMarks {
    fn default() -> Self {
        LineMarks {
            at_start: true,
            pending: Vec::new(),
        }
    }
}

/// What the next character makes of the waiting run.
enum Decision {
    /// It may still be a mark: the character waits with it.
    Wait,
    /// A mark: dropped; the character is read on its own (`nested`: another container's
    /// mark may follow on the line, as after a quote's `>` or a list item's).
    Mark { nested: bool },
    /// Text: the run is written, then the character.
    Text,
}

fn is_line_end(c: char) -> bool {
    c == '\n' || c == '\r'
}

/// The run `run` (never empty) followed by `c`.
fn decide(run: &[Unit], c: char) -> Decision {
    let first = run[0].c;
    let len = run.len();
    let space = is_blank(c);
    if len >= MAX_MARK {
        return Decision::Text;
    }
    match first {
        '#' => {
            if c == '#' && len < 6 {
                Decision::Wait
            } else if space || is_line_end(c) {
                Decision::Mark { nested: false }
            } else {
                Decision::Text
            }
        }
        '-' | '+' | '=' => {
            // A list item's mark: one `-` or `+` and white space.
            if first != '=' && len == 1 && space {
                return Decision::Mark { nested: true };
            }
            // An underline or a rule: the character alone (white space after it) to the
            // line's end.
            let rule = first != '+'
                && run
                    .iter()
                    .all(|u| u.c == first || u.c == ' ' || u.c == '\t');
            if rule && (c == first || space) {
                Decision::Wait
            } else if rule && is_line_end(c) {
                Decision::Mark { nested: false }
            } else if first != '=' && len == 1 && is_line_end(c) {
                // An empty list item.
                Decision::Mark { nested: false }
            } else {
                Decision::Text
            }
        }
        _ => {
            // An ordered list item's mark: up to nine digits, `.` or `)`, white space.
            let delimited = run.last().is_some_and(|u| matches!(u.c, '.' | ')'));
            if delimited {
                if space {
                    Decision::Mark { nested: true }
                } else if is_line_end(c) {
                    Decision::Mark { nested: false }
                } else {
                    Decision::Text
                }
            } else if (c.is_ascii_digit() && len < 9) || matches!(c, '.' | ')') {
                Decision::Wait
            } else {
                Decision::Text
            }
        }
    }
}

/// Whether `c` is the first character of a block mark.
fn starts_mark(c: char) -> bool {
    matches!(c, '>' | '#' | '-' | '+' | '=' | '0'..='9')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Whether a line's first byte `b` may start a block mark (or be the white space before one).
pub(super) fn may_start_mark(b: u8) -> bool {
    starts_mark(char::from(b)) || is_blank(char::from(b))
}

impl Normalizer {
    /// Whether the character `c` of the text goes to [`line_mark_char`](Self::line_mark_char):
    /// at a line's start, after a waiting run, or a line's end (the next line's start).
    pub(super) fn line_marks_read(&self, c: char) -> bool {
        self.line_marks.at_start || !self.line_marks.pending.is_empty() || is_line_end(c)
    }

    /// The block-mark stage for a character of text (`spelled`: a reference's or an escape's):
    /// true when it was taken (a mark dropped, or a candidate waiting). A run that turns out
    /// text is read first.
    pub(super) fn line_mark_char(&mut self, unit: Unit, spelled: bool, out: &mut String) -> bool {
        let c = unit.c;
        if spelled {
            // Text, never a mark (`&gt;`, `\>`): what waited is text too.
            let start =
                self.line_marks.at_start && self.line_marks.pending.is_empty() && is_blank(c);
            self.flush_line_mark(out);
            self.line_marks.at_start = start;
            return false;
        }
        if !self.line_marks.pending.is_empty() {
            match decide(&self.line_marks.pending, c) {
                Decision::Wait => {
                    self.line_marks.pending.push(unit);
                    return true;
                }
                Decision::Mark { nested } => {
                    self.line_marks.pending.clear();
                    self.line_marks.at_start = nested;
                }
                Decision::Text => {
                    self.line_marks.at_start = false;
                    self.flush_line_mark(out);
                }
            }
        }
        if is_line_end(c) {
            self.line_marks.at_start = true;
            return false;
        }
        if !self.line_marks.at_start || is_blank(c) {
            return false;
        }
        if !starts_mark(c) {
            self.line_marks.at_start = false;
            return false;
        }
        // (A block quote's mark: nothing waits for it.)
        if c != '>' {
            self.line_marks.pending.push(unit);
        }
        true
    }

    /// The waiting run is text (or the text ended): read as the rest of the text is.
    pub(super) fn flush_line_mark(&mut self, out: &mut String) {
        if self.line_marks.pending.is_empty() {
            return;
        }
        let run = std::mem::take(&mut self.line_marks.pending);
        self.line_marks.at_start = false;
        for &u in &run {
            self.text_markup_char(u, false, out);
        }
    }
}
