//! Text a browser shows as written ([`Markup::Literal`]): a CDATA section inside an `<svg>` or
//! a `<math>` (foreign content: the tokenizer reads `<![CDATA[` there as a section whose text
//! is shown, up to `]]>`; elsewhere it opens a bogus comment, `tag.rs`), an `<xmp>` up to its
//! end tag, a `<plaintext>` to the end of the text. Tags and references there are characters,
//! shown: the view reads them as spelled text, never as markup, so `<xmp>x<b>forbidden` reads
//! `x<b>forbidden` as a person sees it, and `<svg><text>forbid<![CDATA[den]]>` reads
//! `forbidden`. What may end one (`]]`, `</xmp`) waits in the tag buffer until the next
//! character decides.

use super::syntax::html_space;
use super::tree::Space;
use super::{Literal, Markup};
use crate::scan::normal::{Normalizer, Unit};

/// The end tag that ends an `<xmp>`, up to the character that ends its name.
const XMP_END: &str = "</xmp";

impl Normalizer {
    /// Whether the element a `<![` is read in is foreign (its namespace SVG's or MathML's, as
    /// the tokenizer asks of the adjusted current node).
    pub(super) fn in_foreign_content(&self) -> bool {
        self.current_node()
            .is_some_and(|(space, _)| space != Space::Html)
    }

    /// A character of a literal's text.
    pub(super) fn literal_char(
        &mut self,
        literal: Literal,
        unit: Unit,
        spelled: bool,
        out: &mut String,
    ) {
        let c = unit.c;
        if spelled || literal == Literal::Plaintext {
            self.literal_held(out);
            return self.literal_text(unit, literal != Literal::Cdata && !spelled, out);
        }
        if literal == Literal::Cdata {
            if c == ']' {
                // (`]]]>` shows one `]`.)
                self.tag.push(unit);
                if self.tag.len() > 2 {
                    let first = self.tag.remove(0);
                    self.literal_text(first, false, out);
                }
                return;
            }
            if c == '>' && self.tag.len() == 2 {
                self.tag.clear();
                self.markup = Markup::Text;
                return;
            }
            self.literal_held(out);
            return self.literal_text(unit, false, out);
        }
        // `</xmp` and a character that ends a tag's name: the end tag, read as any tag.
        if self.tag.len() == XMP_END.len() && (c == '>' || c == '/' || html_space(c)) {
            self.markup = Markup::Tag;
            self.tag_raw_start(self.tag[0].raw);
            let read: String = self.tag[1..].iter().map(|u| u.c).chain([c]).collect();
            for ch in read.chars() {
                self.tag_raw_push(ch);
            }
            if !self.tag_continues(c, unit, out) {
                self.tag_as_text(out);
            }
            return;
        }
        let wanted = XMP_END.chars().nth(self.tag.len());
        if wanted == Some(c.to_ascii_lowercase()) {
            self.tag.push(unit);
            return;
        }
        self.literal_held(out);
        if c == '<' {
            // (A `<` ends a reference being read, as in text.)
            self.flush_reference(out);
            self.tag.push(unit);
            return;
        }
        self.literal_text(unit, true, out);
    }

    /// The text ends inside a literal: what waited is text (a CDATA section runs to the end).
    pub(super) fn literal_at_end(&mut self, out: &mut String) {
        self.literal_held(out);
    }

    /// What waited to end the literal did not: text.
    fn literal_held(&mut self, out: &mut String) {
        let decode = self.markup != Markup::Literal(Literal::Cdata);
        for u in std::mem::take(&mut self.tag) {
            self.literal_text(u, decode, out);
        }
    }

    /// One character shown as written: through the elements' stage (an element around may
    /// hide it), then as spelled text — or, in an `<xmp>` or a `<plaintext>` (`decode`), with
    /// its references decoded and emphasis read: to CommonMark the element's tag is inline
    /// HTML and its content Markdown text, whose output the element then shows (`<` stays a
    /// character: CommonMark passes tags through, the element shows them).
    fn literal_text(&mut self, unit: Unit, decode: bool, out: &mut String) {
        if self.element_text_char(unit, true, out) {
            return;
        }
        match decode {
            true => self.reference_or_markup(unit.c, unit.raw, unit.raw_end, out),
            false => self.text_markup_char(unit, true, out),
        }
    }
}
