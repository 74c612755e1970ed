//! Tables: text a browser moves. Inside a `<table>` (or its `<tr>`, `<tbody>`, …) but outside
//! a cell (`<td>`, `<th>`, `<caption>`), text and the elements it is in are *foster-parented*
//! by a browser's parser: shown before the table, joined to the text before it
//! (`forbid<table>den<tr><td>x</td></tr></table>` shows `forbidden` above the table's `x`).
//! The view reads the text where it is written; the browser's reading — the view's last
//! characters before the table, then every such text of the table in order — is an aside,
//! written when the table ends (its end tag, or the end of the text).
//!
//! Bounds: the reading is held back from its context until it is written (so a match in it
//! blocks before any of it is released), at most [`MAX_TABLE`] characters of the table; past
//! that the hold is released, and text in a foster position after it is refused
//! ([`super::super::Normalizer::take_refusal`]): it would join a context already released.
//! At most [`MAX_FOSTER`] bytes of such text are kept, and [`MAX_TABLES`] tables nested.

use super::super::Normalizer;

/// Characters of a table read while its reading is held back.
const MAX_TABLE: usize = 4096;

/// Bytes of foster-parented text kept per table.
const MAX_FOSTER: usize = 1024;

/// Tables nested (in cells) that are followed; deeper ones are read as text in a cell.
const MAX_TABLES: usize = 8;

/// An open table, as the browser's parser sees the text in it.
#[derive(Debug, Clone, Default)]
pub(in crate::scan::normal) struct Table {
    /// Inside a cell (or caption): text stays in the table.
    in_cell: bool,
    /// The view before the table (at most [`REPLAY`](super::super::aside::REPLAY) characters), and its raw start.
    context: String,
    context_raw: u64,
    /// Text of foster positions, as the view wrote it.
    foster: String,
    /// Where the tags read in it since the last character written start: the space a block
    /// tag writes is no text (its raw span is the tag's; it may be written after later tags).
    tags_at: Vec<u64>,
    /// The context is a reading of the browser's taken over (written even with no moved text).
    always: bool,
    /// White space was read in a foster position since its last text (the view may have
    /// folded it into a table tag's space, which is no text).
    space: bool,
    /// Characters read since the table opened; past [`MAX_TABLE`] the hold is released.
    read: usize,
    released: bool,
}

impl Table {
    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Table>()
            + self.context.capacity()
            + self.foster.capacity()
            + self.tags_at.capacity() * 8
    }
}

impl Normalizer {
    /// A tag of the table model ended (`closing`: an end tag), at raw `raw_end`.
    pub(super) fn table_tag(&mut self, name: &str, closing: bool, out: &mut String) {
        let at = self.tag_raw_at;
        // (Only the table's own tags: an element moved with the text, `<br>`, breaks it.)
        let table_model = matches!(
            name,
            "table"
                | "tr"
                | "td"
                | "th"
                | "tbody"
                | "thead"
                | "tfoot"
                | "caption"
                | "col"
                | "colgroup"
        );
        if let Some(t) = self
            .tables
            .last_mut()
            .filter(|t| table_model && t.tags_at.len() < 64)
        {
            t.tags_at.push(at);
        }
        match (name, closing) {
            ("table", false) => {
                if self.tables.len() >= MAX_TABLES {
                    return;
                }
                // The browser's reading so far (a construct it reads otherwise being recorded:
                // `join.rs`), else the view's last characters: the moved text joins it.
                let joined = self.browser_reading();
                let (context, context_raw, always) = match joined {
                    Some((text, raw)) => (text, raw, true),
                    None => {
                        let (context, raw) = self.view_context(at);
                        (context, raw, false)
                    }
                };
                self.tables.push(Table {
                    // (Either is a tail of its last line already.)
                    context,
                    context_raw,
                    tags_at: vec![at],
                    always,
                    ..Table::default()
                });
            }
            ("table", true) => {
                if let Some(t) = self.tables.pop() {
                    self.end_table(t, out);
                }
            }
            ("td" | "th" | "caption", false) => self.set_cell(true),
            ("td" | "th" | "caption" | "tr" | "tbody" | "thead" | "tfoot", true)
            | ("tr" | "tbody" | "thead" | "tfoot" | "colgroup" | "col", false) => {
                self.set_cell(false)
            }
            _ => {}
        }
    }

    fn set_cell(&mut self, in_cell: bool) {
        if let Some(t) = self.tables.last_mut() {
            t.in_cell = in_cell;
        }
    }

    /// A raw character read: counts towards the bound of every table's hold. A table past it
    /// writes its reading so far, and holds nothing back any more.
    pub(in crate::scan::normal) fn table_char(&mut self, c: char, out: &mut String) {
        if c.is_whitespace()
            && self.markup == super::Markup::Text
            && !self.annotation_hidden
            && !self.browser_hides_now()
        {
            if let Some(t) = self.tables.last_mut().filter(|t| !t.in_cell) {
                t.space = true;
            }
        }
        let mut due = Vec::new();
        for t in &mut self.tables {
            t.read += 1;
            if !t.released && t.read > MAX_TABLE {
                t.released = true;
                if !t.foster.trim().is_empty() {
                    due.push((format!("{}{}", t.context, t.foster), t.context_raw));
                }
                t.foster.clear();
            }
        }
        for (text, raw) in due {
            let raw_end = self.raw_end(self.out_len);
            self.aside(&text, raw, raw_end, out);
        }
    }

    /// A character the view writes: a foster position's is kept for the browser's reading
    /// (refused past the bound: `raw`..`raw_end` is where it came from).
    pub(in crate::scan::normal) fn table_written(&mut self, c: char, raw: u64, raw_end: u64) {
        let hidden = self.browser_hides_now();
        let Some(t) = self.tables.last_mut() else {
            return;
        };
        if c == ' ' && t.tags_at.contains(&raw) {
            return;
        }
        t.tags_at.clear();
        // (What the browser hides here — an autolink, an element past a blank line — it hides
        // in the moved text too.)
        if t.in_cell || hidden {
            return;
        }
        if std::mem::take(&mut t.space) && !c.is_whitespace() && !t.foster.ends_with(' ') {
            t.foster.push(' ');
        }
        if c.is_whitespace() {
            t.space = false;
        }
        if t.released && !c.is_whitespace() {
            self.refused = Some((raw, raw_end));
            return;
        }
        if t.foster.len() < MAX_FOSTER {
            t.foster.push(c);
        }
    }

    /// Where the earliest held reading starts.
    pub(in crate::scan::normal) fn tables_from(&self) -> Option<u64> {
        self.tables
            .iter()
            .filter(|t| !t.released)
            .map(|t| t.context_raw)
            .min()
    }

    /// The table ended: its foster-parented text, after the text before the table, is an
    /// aside (when there is any).
    fn end_table(&mut self, t: Table, out: &mut String) {
        if (t.foster.trim().is_empty() && !t.always) || t.released {
            return;
        }
        let raw_end = self.raw_end(self.out_len);
        let text = format!("{}{}", t.context, t.foster);
        self.aside(&text, t.context_raw, raw_end, out);
    }

    /// The end of the text: open tables end (a browser's parser closes them).
    pub(in crate::scan::normal) fn end_tables(&mut self, out: &mut String) {
        while let Some(t) = self.tables.pop() {
            self.end_table(t, out);
        }
    }
}
