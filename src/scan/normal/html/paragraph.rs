//! A block in a Markdown paragraph, after elements that hide their text (`<rp>`, `<datalist>`,
//! a style that may hide): to a browser reading the text as HTML they stay open and the
//! block's text hidden; Markdown wrapped the paragraph in a `<p>`, which the block's start
//! tag closes, and with it every element opened in it — so the block's text is shown, up to
//! the paragraph's end. The view reads the HTML reading in line (the text hidden, an aside)
//! and Markdown's as a trailing reading (`join.rs`): the view before the block, the block's
//! last hidden characters, and what the view writes after the paragraph's end.

use super::super::markup::decode_references;
use super::super::Normalizer;
use super::tree::{closed_by_end_tag, Node, Space};

/// The hidden characters a block showed to Markdown that its reading past the paragraph's end
/// keeps (a phrase across the end is read whole up to this length).
const MARKDOWN_SHOWN: usize = 128;

impl Normalizer {
    /// A start tag that closes a `<p>` (a block), with elements open that hide their text: in
    /// a Markdown paragraph it closes the `<p>` Markdown wrapped the paragraph in, and with it
    /// every element opened in it (`<rp><div>forbidden` shows `forbidden`), up to the
    /// paragraph's end. The view reads the text as a browser reading HTML does (still hidden;
    /// read as hidden text, an aside); Markdown's reading runs on past the paragraph's end,
    /// where its last hidden characters are joined to what follows
    /// ([`markdown_paragraph_ends`](Self::markdown_paragraph_ends)). Not when a `<p>` of the
    /// text is open (the tag closes that one) or a scope boundary is (no `<p>` in scope).
    pub(super) fn markdown_paragraph_closed(&mut self) {
        if !self.annotation_hidden || self.markdown_shown_from.is_some() {
            return;
        }
        let open = std::iter::once(("p", Space::Html))
            .chain(self.open_elements.iter().map(|e| (e.name(), e.space())))
            .collect::<Vec<_>>();
        if closed_by_end_tag(&open, "p") == Some(0) {
            // (The view before the block: a person reads on from it to the block's text.)
            let (context, context_raw) = self.view_context(self.tag_raw_at);
            self.markdown_shown_from = Some((self.tag_raw_at, context, context_raw));
        }
    }

    /// Markdown's block ends (the elements hiding text close for it): the hidden text a block
    /// showed to Markdown (its last [`MARKDOWN_SHOWN`] characters, white space one space) is
    /// the context of a reading of what the view writes next (a trailing reading, `join.rs`).
    pub(in crate::scan::normal) fn markdown_paragraph_ends(&mut self, raw: u64, blank: bool) {
        let Some((from, mut text, context_raw)) = self.markdown_shown_from.take() else {
            return;
        };
        if !text.is_empty() && !text.ends_with(' ') {
            text.push(' ');
        }
        // (The hidden text is in raw order: what the block showed is its tail.)
        let hidden = &self.element_hidden.0;
        let shown = &hidden[hidden.partition_point(|u| u.raw < from)..];
        let skip = shown.len().saturating_sub(MARKDOWN_SHOWN);
        let Some(first) = shown.get(skip) else {
            return;
        };
        // (Held back from the view before the block, while the block's text is all there.)
        let start = if skip == 0 { context_raw } else { first.raw };
        if skip > 0 {
            text.clear();
        }
        for u in &shown[skip..] {
            if u.c.is_whitespace() {
                if !text.ends_with(' ') {
                    text.push(' ');
                }
            } else {
                text.push(u.c);
            }
        }
        // (A paragraph's end is a space between the paragraphs' words.)
        if blank && !text.ends_with(' ') {
            text.push(' ');
        }
        let text = if text.contains('&') {
            decode_references(&text)
        } else {
            text
        };
        self.trail_reading(text, start, raw);
    }
}
