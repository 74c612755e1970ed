//! Autolinks in a word: a Markdown renderer shows `<ab:c>` and `<x@y.z>` as links (their text
//! without the brackets), a browser reading the same text as HTML hides them as elements it
//! does not know. The view is the Markdown reading (the link text flows on in the word:
//! `forbid<ab:c>den` is `forbidab:cden`); the browser's reading — the text before the autolink
//! joined to the text after it, `forbidden` — is written as an aside (`aside.rs`).
//!
//! When an autolink opens, the view's last characters (at most
//! [`REPLAY`](super::aside::REPLAY), back to the previous line break) are kept as the
//! context; after its `>`, the view goes on, and once [`TRAIL`] bytes of it were written (or a
//! paragraph ends, or the text), the context followed by the view's text since the `>` (up to
//! a line break) is the aside. Every split of the text writes the same view, so the aside is
//! the same. What turns out to be no autolink (white space or a `<` before its `>`: Markdown
//! shows it as text) is a tag to a browser, up to the next `>`: the aside joins the context to
//! the view after that `>`.

use super::Normalizer;

/// Bytes of the view after an autolink that its aside joins to the context (within what the
/// view keeps: [`RECENT_BYTES`](super::aside::RECENT_BYTES)).
pub(super) const TRAIL: u64 = 192;

/// The reading of a browser around one autolink, being recorded.
#[derive(Debug, Clone, Default)]
pub(super) struct Join {
    /// The view's text before the autolink, and the raw position where it starts.
    context: String,
    context_raw: u64,
    /// Where the view was when the autolink's `>` was read.
    after: Option<u64>,
    /// It was no autolink (white space or a `<` before its `>`: Markdown shows it as text), but
    /// a browser reads it as a tag up to the next `>`; `gt`: that `>` was read.
    tag: bool,
    gt: bool,
}

impl Join {
    pub(super) fn heap_bytes(&self) -> usize {
        self.context.capacity()
    }
}

impl Normalizer {
    /// An autolink opens at raw `raw` (its `<`): the view before it is the context.
    pub(super) fn open_join(&mut self, raw: u64, out: &mut String) {
        self.end_join(out);
        let (at, context) = self.replay_text();
        let context_raw = if context.is_empty() {
            raw
        } else {
            self.raw_start(at)
        };
        self.join = Some(Box::new(Join {
            context,
            context_raw,
            after: None,
            tag: false,
            gt: false,
        }));
    }

    /// The autolink's `>` (`true`) or the end of what was read as one (`false`: it was not an
    /// autolink, and a browser's tag goes on to the next `>`).
    pub(super) fn close_join(&mut self, autolink: bool) {
        let at = self.out_len;
        if let Some(j) = &mut self.join {
            if autolink {
                j.after = Some(at);
            } else {
                j.tag = true;
            }
        }
    }

    /// A raw character, before the rest of the view reads it: after a browser's tag, the
    /// character after its `>` starts the text after it; the end of a paragraph, or enough
    /// view after the autolink, writes the aside.
    pub(super) fn join_char(&mut self, c: char, out: &mut String) {
        let at = self.out_len;
        let Some(j) = &mut self.join else { return };
        if j.tag && j.after.is_none() {
            if j.gt {
                j.after = Some(at);
            } else {
                j.gt = c == '>';
                if super::chars::is_paragraph_end(c) {
                    self.join = None;
                }
                return;
            }
        }
        let Some(after) = j.after else { return };
        if at - after >= TRAIL || super::chars::is_paragraph_end(c) {
            self.end_join(out);
        }
    }

    /// Writes the browser's reading — the context and the view since the autolink's `>` —
    /// as an aside, when the autolink was closed and text followed it.
    pub(super) fn end_join(&mut self, out: &mut String) {
        let Some(j) = self.join.take() else { return };
        // No `>` yet (or the text ended right after a tag's): nothing follows.
        let Some(after) = j.after else { return };
        let since = usize::try_from(self.out_len - after).unwrap_or(usize::MAX);
        let Some(start) = self.recent.len().checked_sub(since) else {
            return;
        };
        let Some(tail) = self.recent.get(start..) else {
            return;
        };
        let tail = tail.split('\n').next().unwrap_or("");
        if tail.trim().is_empty() {
            return;
        }
        let mut text = j.context;
        text.push_str(tail);
        let raw_end = self.raw_end(self.out_len);
        self.aside(&text, j.context_raw, raw_end, out);
    }
}
