//! Where Markdown's code blocks end what markup read inside them opened.
//!
//! In a code block (a fenced one, ```` ``` ```` or `~~~` after at most three spaces, or an
//! indented one, lines of four spaces after a blank line) Markdown shows markup as text: a
//! `<svg>`, `<!--`, `<script>` or `<rt>` there opens nothing, and the lines after the block
//! are shown. The view reads markup as a browser reading HTML does, so what such a construct
//! hides would stay hidden past the block (as a browser reading the text as HTML hides it).
//! A line that starts or ends a code block is therefore a block end for Markdown's reading,
//! as a blank line is (`elements.rs`): the open elements that hide text are closed (the
//! browser's reading, the text before joined to what follows their end, is recorded as an
//! aside, `join.rs`), and a comment, raw text, a declaration or a tag's attributes being
//! read end there as hidden text. A fence line inside an HTML block Markdown passes through
//! (a comment's lines) is read as a block end all the same: the view then shows what
//! Markdown hides — a false block at worst, never a pass.

use super::super::{Normalizer, Unit};
use super::Markup;

/// The state of the line being read, for Markdown's code blocks.
#[derive(Debug, Clone, Copy)]
pub(in crate::scan::normal) struct LineLead {
    /// Columns of indentation read so far (`None`: past the line's first other character).
    indent: Option<u8>,
    /// The fence character the line starts with, and how many of it came in a row (`0`: none,
    /// or the run ended).
    fence: (char, u8),
    /// The line holds a character other than white space.
    filled: bool,
    /// The last line was blank (or the text starts): an indented code block may start.
    after_blank: bool,
    /// The lines before are an indented code block.
    code: bool,
    /// The last character was a `\r` (its `\n` ends no other line).
    after_cr: bool,
}

impl Default for LineLead {
    fn default() -> Self {
        LineLead {
            indent: Some(0),
            fence: (' ', 0),
            filled: false,
            after_blank: true,
            code: false,
            after_cr: false,
        }
    }
}

impl LineLead {
    /// Whether the next character may end an indented code block (so it must not be taken
    /// by the plain fast path).
    pub(in crate::scan::normal) fn waits(&self) -> bool {
        self.code && self.indent.is_some()
    }

    /// A line's first character other than white space, at `indent` columns: whether it ends
    /// an indented code block.
    fn first_filled(&mut self, indent: u8) -> bool {
        self.filled = true;
        self.indent = None;
        let ends = self.code && indent < 4;
        self.code = indent >= 4 && (self.after_blank || self.code);
        ends
    }

    /// Plain ASCII text read by the fast path (no line break, no fence character; never
    /// while [`waits`](Self::waits)).
    pub(in crate::scan::normal) fn plain(&mut self, text: &[u8]) {
        self.after_cr = false;
        self.fence.1 = 0;
        for &b in text {
            match self.indent {
                Some(n) if b == b' ' => self.indent = Some(n.saturating_add(1).min(8)),
                Some(n) => {
                    let _ = self.first_filled(n);
                }
                None => break,
            }
        }
    }

    /// The next raw character; whether a code block starts or ends at it.
    #[inline]
    fn next(&mut self, c: char) -> bool {
        // Inside a line, past its start: nothing to read (the common case).
        if self.indent.is_none() && self.fence.1 == 0 && !self.after_cr && c != '\n' && c != '\r' {
            return false;
        }
        let after_cr = std::mem::replace(&mut self.after_cr, c == '\r');
        if c == '\n' || c == '\r' {
            if c == '\n' && after_cr {
                return false;
            }
            self.after_blank = !self.filled;
            self.indent = Some(0);
            self.fence = (' ', 0);
            self.filled = false;
            return false;
        }
        match self.indent {
            Some(n) if c == ' ' => {
                self.indent = Some(n.saturating_add(1).min(8));
                false
            }
            Some(n) if c == '\t' => {
                self.indent = Some((n + 4 - n % 4).min(8));
                false
            }
            Some(n) => {
                let ends = self.first_filled(n);
                if n < 4 && (c == '`' || c == '~') {
                    self.fence = (c, 1);
                }
                ends
            }
            None if self.fence.1 > 0 && c == self.fence.0 => {
                self.fence.1 += 1;
                if self.fence.1 == 3 {
                    self.fence.1 = 0;
                    return true;
                }
                false
            }
            None => {
                self.fence.1 = 0;
                false
            }
        }
    }
}

impl Normalizer {
    /// The line reader for a character of the text (any markup state): at a code block's
    /// start or end, Markdown's reading of what markup opened ends.
    #[inline]
    pub(in crate::scan::normal) fn line_lead(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) {
        if self.lead.next(c) {
            let unit = Unit {
                c,
                raw,
                raw_end,
                exact: true,
            };
            self.markdown_block_ends(unit, out);
        }
    }

    /// A code block starts or ends: what hides text for Markdown ends (see the module docs).
    fn markdown_block_ends(&mut self, unit: Unit, out: &mut String) {
        match self.markup {
            Markup::Comment { .. }
            | Markup::RawText { .. }
            | Markup::Bogus
            | Markup::Destination(_) => {
                self.end_hidden(out);
                self.script_state = 0;
                self.script_tail.clear();
                // A style sheet's rules read so far apply (a browser reads on: more hidden).
                if self.sheet_raw.is_some() {
                    self.style_sheet_ended(unit.raw_end);
                }
                self.markup = Markup::Text;
                self.hidden_element.clear();
            }
            Markup::Attributes { .. } => {
                self.end_hidden(out);
                // Never closed: a browser drops it, a Markdown renderer shows it.
                self.tag_ended(true);
                self.markup = Markup::Text;
                self.raw_text = None;
                self.hidden_element.clear();
                self.attribute_name.clear();
                self.hidden_attribute = false;
            }
            // Text shown as written ends with Markdown's block: what waited is text.
            Markup::Literal(_) => {
                self.literal_at_end(out);
                self.markup = Markup::Text;
            }
            Markup::Text | Markup::Tag | Markup::Autolink => {}
        }
        self.elements_end_for_markdown(unit.raw, out, false);
    }
}
