//! Text one reader sees and the other does not, written into the view as a line of its own.
//!
//! A person and a model read different text where the bytes carry something that is not
//! shown (an HTML comment, a tag's attributes, a link's destination: a model reads them) or
//! shown in another order (text under bidi controls). The view is the person's text, joined
//! as it is shown; the other reading is written as an *aside*: a line break, the aside's
//! text, a line break, and then the view's last characters again (at most [`REPLAY`] of them,
//! back to the previous line break), so the text after the aside joins the text before it as
//! the person sees it. A phrase matches in either reading; none of the view's line breaks come
//! from the text (white space folds to one space), so no phrase is matched across an aside.
//!
//! Asides close together are written together: an aside waits (held back, as unread text)
//! until the view has gone [`REPLAY`] bytes past the first one waiting (or [`BATCH_BYTES`] of
//! asides wait, or the text ends), and then every aside waiting is written, each on its line,
//! with one replay after them. The person's text goes on meanwhile on its own line, and a text
//! dense with hidden markup (`a<b>a<b>…`) costs a replay per [`REPLAY`] bytes of view rather
//! than one per tag, so the view stays within a small multiple of the text.
//!
//! Map: an aside maps to the raw span it came from; the characters written again map from
//! where they came to the end of that span, so a match through them holds back and redacts
//! everything in between (the raw end of the map never goes back).

use super::{Normalizer, Unit};

/// Characters of the view written again after an aside (a phrase longer than this that runs
/// through an aside is not joined).
pub(super) const REPLAY: usize = 64;

/// View bytes kept for [`REPLAY`] (`recent` is cut back to this when it reaches twice as much).
pub(super) const RECENT_BYTES: usize = 4 * REPLAY;

/// Bytes of asides waiting past which they are written at once.
pub(super) const BATCH_BYTES: usize = 1024;

/// An aside waiting to be written: its text and the raw span it came from.
#[derive(Debug, Clone)]
pub(super) struct Aside {
    text: String,
    raw: u64,
    raw_end: u64,
}

impl Aside {
    pub(super) fn raw(&self) -> u64 {
        self.raw
    }

    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Aside>() + self.text.capacity()
    }
}

/// The last [`REPLAY`] characters of `text` after its last line break: what is written again
/// after an aside, and the context a reading recorded elsewhere starts from.
pub(super) fn last_line_tail(text: &str) -> &str {
    let line = text.rsplit('\n').next().unwrap_or("");
    let start = line
        .char_indices()
        .rev()
        .nth(REPLAY - 1)
        .map_or(0, |(i, _)| i);
    &line[start..]
}

impl Normalizer {
    /// Keeps the view's last characters (what an aside writes again).
    pub(super) fn remember(&mut self, view: &str) {
        if view.len() >= RECENT_BYTES {
            self.recent.clear();
            let mut cut = view.len() - RECENT_BYTES;
            while !view.is_char_boundary(cut) {
                cut += 1;
            }
            self.recent.push_str(&view[cut..]);
            return;
        }
        self.recent.push_str(view);
        if self.recent.len() >= 2 * RECENT_BYTES {
            let mut cut = self.recent.len() - RECENT_BYTES;
            while !self.recent.is_char_boundary(cut) {
                cut += 1;
            }
            self.recent.drain(..cut);
        }
    }

    /// The view's last characters after its last line break (at most [`REPLAY`]), as text
    /// and with the view position of its first byte.
    pub(super) fn replay_text(&self) -> (u64, String) {
        let text = last_line_tail(&self.recent);
        (self.out_len - text.len() as u64, text.to_owned())
    }

    /// `text`, which came from raw `raw..raw_end`, is an aside: it waits to be written with
    /// the asides close to it (see the module docs).
    pub(super) fn aside(&mut self, text: &str, raw: u64, raw_end: u64, out: &mut String) {
        if text.is_empty() {
            return;
        }
        if self.asides.is_empty() {
            self.asides_from = self.out_len;
            self.asides_bytes = 0;
        }
        self.asides_bytes += text.len();
        self.asides.push(Aside {
            text: text.to_owned(),
            raw,
            raw_end,
        });
        if self.asides_bytes >= BATCH_BYTES {
            self.write_asides(out);
        }
    }

    /// Writes the asides waiting once the view has gone [`REPLAY`] bytes past the first (called
    /// before each character, so the point depends on the text alone, never on its splits).
    pub(super) fn asides_due(&mut self, out: &mut String) {
        if !self.asides.is_empty() && self.out_len >= self.asides_from + REPLAY as u64 {
            self.write_asides(out);
        }
    }

    /// Writes every aside waiting, each on its line, then the view's last characters again.
    pub(super) fn write_asides(&mut self, out: &mut String) {
        if self.asides.is_empty() {
            return;
        }
        let asides = std::mem::take(&mut self.asides);
        self.settle(out);
        // The asides and the view written again after them are no text a reader reads on: no
        // recording around an autolink takes them (`join.rs`).
        let joins = std::mem::take(&mut self.joins);
        let style_readings = std::mem::take(&mut self.style_readings);
        let tables = std::mem::take(&mut self.tables);
        // Nor is the text's state around line breaks (`segment.rs`) the asides'.
        let (after_break, after_zwsp) = (self.after_break, self.after_zwsp);
        let (at, replay) = self.replay_text();
        let raw_end = asides.iter().map(|a| a.raw_end).max().unwrap_or(0);
        let replay: Vec<Unit> = replay
            .char_indices()
            .map(|(i, c)| {
                let pos = at + i as u64;
                Unit {
                    c,
                    raw: self.raw_start(pos),
                    raw_end: self.raw_end(pos + c.len_utf8() as u64).max(raw_end),
                    exact: false,
                }
            })
            .collect();
        for a in &asides {
            self.line_break(a.raw, a.raw_end, out);
            for c in a.text.chars() {
                self.text_char(c, a.raw, a.raw_end, false, out);
            }
            self.settle(out);
        }
        if let Some(last) = asides.last() {
            self.line_break(last.raw, last.raw_end, out);
        }
        self.word_latin = false;
        self.base = None;
        for u in replay {
            self.starter(u, out);
        }
        self.joins = joins;
        self.style_readings = style_readings;
        self.tables = tables;
        self.after_break = after_break;
        self.after_zwsp = after_zwsp;
    }

    /// Writes whatever waits in the stages after markup (marks, a word's look-alike letters).
    fn settle(&mut self, out: &mut String) {
        self.flush_marks(out);
        self.flush_held(false, out);
    }

    /// A line break of the view (only asides make them).
    fn line_break(&mut self, raw: u64, raw_end: u64, out: &mut String) {
        out.push('\n');
        self.recent.push('\n');
        self.after_space = true;
        self.word_latin = false;
        self.push_run(raw, raw_end, false, 1);
    }
}
