//! Elements whose rendering moves text rather than hiding it:
//!
//! - a **ruby annotation** (`<rt>`) is shown above its base text, not between its letters
//!   (`forbid<ruby>den<rt>zz</rt></ruby>` reads `forbidden`): its text is hidden, an aside, up
//!   to what closes it — `</rt>`, an `<rt>`, `<rp>` or `<rtc>`, `</rtc>`, `</ruby>`, a block
//!   tag or the paragraph's end (`<rp>`'s own text is raw text, hidden already);
//! - **`<bdo dir="rtl">`** (and `ltr`) shows its text in the forced direction, as the bidi
//!   override U+202E (U+202D) does: the bidi stage (`bidi.rs`) reads it as that override, up to
//!   `</bdo>`, so the text shown reversed is an aside in the order it is shown.

use super::super::{Normalizer, Unit};

/// Tag names kept to decide what a tag opens or closes (longer ones are none of these).
const MAX_NAME: usize = 8;

impl Normalizer {
    /// A tag's name was read (`closing`: an end tag): kept for when the tag ends.
    pub(super) fn element_named(&mut self, name: &str, closing: bool) {
        self.tag_element.clear();
        if name.len() <= MAX_NAME {
            self.tag_element.push_str(name);
        }
        self.tag_closing = closing;
        self.dir_attribute = false;
        self.dir_value.clear();
    }

    /// A character of an attribute's value: kept when it is a `dir`'s.
    pub(super) fn attribute_value_char(&mut self, c: char) {
        if self.dir_attribute && self.dir_value.len() < MAX_NAME {
            self.dir_value.push(c.to_ascii_lowercase());
        }
    }

    /// A tag ended (`block`: it breaks a block): the annotation or override it opens or closes.
    pub(super) fn element_ended(&mut self, block: bool, raw_end: u64) {
        let name = std::mem::take(&mut self.tag_element);
        let dir = std::mem::take(&mut self.dir_value);
        if self.bidi.is_empty() {
            // The bidi run a `<bdo>` opened has ended (its paragraph, its bound).
            self.bdo_open = 0;
        }
        match (name.as_str(), self.tag_closing) {
            ("rt", false) => self.in_rt = true,
            ("rt" | "rtc" | "ruby", true) | ("rp" | "rtc", false) => self.in_rt = false,
            ("bdo", false) => {
                let c = match dir.trim() {
                    "rtl" => '\u{202E}',
                    "ltr" => '\u{202D}',
                    _ => return,
                };
                self.bdo_open = self.bdo_open.saturating_add(1);
                self.bidi_open_spelled(c, raw_end);
            }
            ("bdo", true) if self.bdo_open > 0 => {
                self.bdo_open -= 1;
                self.bidi_close_spelled('\u{202C}', self.tag_raw_at);
            }
            _ if block => self.in_rt = false,
            _ => {}
        }
    }

    /// Inside a ruby annotation, a character of the text (not markup): hidden. Returns false
    /// when the character goes on as text (outside one, or the paragraph's end, which closes
    /// it).
    pub(super) fn annotation_char(&mut self, unit: Unit, spelled: bool, out: &mut String) -> bool {
        if !self.in_rt {
            return false;
        }
        if super::super::chars::is_paragraph_end(unit.c) {
            self.in_rt = false;
            self.end_hidden(out);
            return false;
        }
        if !spelled && unit.c == '<' {
            // A tag: what the annotation said so far is one aside.
            self.end_hidden(out);
            return false;
        }
        self.hide(unit, out);
        true
    }
}
