//! Comments and bogus comments (`<!--`, `<?`, `<!x`, `<![CDATA[`) CommonMark does not read as
//! one: a browser hides them up to their end (`-->`, `>`), but CommonMark reads one in a
//! paragraph only when it ends in that paragraph. Cut by a blank line (or never ended), it is
//! text to a Markdown renderer, and what follows its opener is read as Markdown and HTML again:
//! its tags are tags (`a <!--forbid<b hidden>x</b>den fruit` shows `a <!--forbidden fruit`),
//! and after the blank line a new paragraph starts, whose first `>` ends the browser's bogus
//! comment (`a <![CDATA[`, a blank line, `forbidden<b> fruit` shows `forbidden fruit`). So
//! is one that ends as a browser's but not as CommonMark's (`<![CDATA[x>` without `]]>`, `<?x>`
//! without `?>`, `<!-x>`): read again, on to the end of its paragraph.
//!
//! The view hides such a construct (the browser's reading). Its text is kept from its opener
//! on — held back, up to [`MAX_REREAD`] characters; past that it is refused once cut — and
//! when a blank line cut it (read on to the end of the line where it then ends) or the text
//! ends inside it, that text is read again as a text of its own by a view of its own: that
//! view is an aside. (A construct at a line's start is an HTML block to CommonMark, passed
//! whole; it is read again all the same: a reading no reader has only adds matches.)

use super::super::{Normalize, Normalizer};
use super::Markup;

/// Characters of a construct kept to read again.
const MAX_REREAD: usize = 2048;

/// A construct being read that a blank line may cut.
#[derive(Debug, Default, Clone)]
pub(in crate::scan::normal) struct Reread {
    /// Its text after the opener, as written (a spelled `<` or `&` spelled again).
    text: String,
    /// Where it starts (its `<`), and where the last character read ends.
    raw: u64,
    raw_end: u64,
    /// A blank line passed inside it.
    cut: bool,
    /// It ended after a cut: read on to the end of the line.
    ended: bool,
    /// The line read so far is white space.
    line_blank: bool,
    /// More than [`MAX_REREAD`] characters: not kept.
    past_bound: bool,
    /// How it opened (`<!--`, `<?`, `<![`, `<!x`, …), its first characters and its last ones
    /// (kept past the bound): whether CommonMark reads it as a construct.
    opener: String,
    head: String,
    tail: String,
}

/// Whether CommonMark reads a construct that opened with `opener` and holds `head` … `tail`
/// (its end included) as one: a comment ending `-->`, a processing instruction ending `?>`, a
/// CDATA section ending `]]>`, a declaration (`<!` and a letter). Another (`<!-x>`, `</1>`, a
/// comment a browser ends at `--!>`) is text to it.
fn commonmark_reads(opener: &str, head: &str, tail: &str) -> bool {
    match opener {
        "<!--" => tail.ends_with("-->") || head == ">" || head == "->",
        "<?" => tail.ends_with("?>"),
        "<![" => head.starts_with("CDATA[") && tail.ends_with("]]>"),
        o => o.len() == 3 && o.starts_with("<!") && o.as_bytes()[2].is_ascii_alphabetic(),
    }
}

impl Reread {
    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Reread>() + self.text.capacity()
    }

    /// Where its held text starts.
    pub(in crate::scan::normal) fn held_from(&self) -> Option<u64> {
        (!self.past_bound).then_some(self.raw)
    }
}

impl Normalizer {
    /// A character of the text, before the markup reads it: kept while a comment (or bogus
    /// comment) is open, and after it ends when a blank line cut it.
    #[inline]
    pub(super) fn reread_char(&mut self, c: char, raw_end: u64, spelled: bool, out: &mut String) {
        let open = matches!(self.markup, Markup::Comment { .. } | Markup::Bogus);
        if self.reread.is_none() {
            if !open || self.nested {
                return;
            }
            let opener: String = self.tag_raw.chars().take(4).collect();
            // What the opener read past `<!` (`<!-x`, `<!x`) is the construct's text to
            // CommonMark.
            let text = match opener.as_str() {
                "<!--" => String::new(),
                o => o.chars().skip(2).collect(),
            };
            self.reread = Some(Box::new(Reread {
                raw: self.tag_raw_at,
                opener,
                text,
                ..Reread::default()
            }));
        }
        let Some(r) = self.reread.as_deref_mut() else {
            return;
        };
        if !open && !r.ended {
            if !r.cut && commonmark_reads(&r.opener, &r.head, &r.tail) {
                // Ended in its paragraph: CommonMark reads it as the browser does.
                self.reread = None;
                return;
            }
            r.cut = true;
            r.ended = true;
        }
        // After it ended, read on to the end of the paragraph (a blank line), or the bound.
        if r.ended && ((c == '\n' && r.line_blank) || c == '\u{2029}' || r.text.len() >= MAX_REREAD)
        {
            self.reread_written(out);
            return;
        }
        if matches!(c, '\n' | '\u{2029}') {
            r.cut |= r.line_blank || c == '\u{2029}';
            r.line_blank = true;
        } else if !c.is_whitespace() {
            r.line_blank = false;
        }
        r.raw_end = raw_end;
        if r.head.len() < 6 {
            r.head.push(c);
        }
        if r.tail.len() >= 8 {
            r.tail.remove(0);
        }
        r.tail.push(c);
        if r.past_bound {
            return;
        }
        match c {
            '<' if spelled => r.text.push_str("&lt;"),
            '&' if spelled => r.text.push_str("&amp;"),
            c => r.text.push(c),
        }
        if r.text.len() > MAX_REREAD {
            r.past_bound = true;
            r.text = String::new();
        }
    }

    /// The text ends: a construct still open is text to CommonMark, read again (as one a
    /// blank line cut).
    pub(super) fn reread_at_end(&mut self, out: &mut String) {
        if let Some(r) = self.reread.as_deref_mut() {
            r.cut = true;
            self.reread_written(out);
        }
    }

    /// The construct's text read again by a view of its own, written as an aside (refused when
    /// it was too long to keep, or its own view refuses it).
    fn reread_written(&mut self, out: &mut String) {
        let Some(r) = self.reread.take() else {
            return;
        };
        if !r.cut {
            return;
        }
        if r.past_bound {
            self.refuse(r.raw, r.raw_end);
            return;
        }
        let mut view = Normalizer::new(Normalize::Full);
        view.nested = true;
        let mut text = view.feed(&r.text).into_owned();
        text.push_str(&view.finish());
        if view.take_refusal().is_some() {
            self.refuse(r.raw, r.raw_end);
        }
        if text.chars().any(char::is_alphanumeric) {
            self.aside(&text, r.raw, r.raw_end, out);
        }
    }
}
