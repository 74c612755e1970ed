//! `full`: inline Markdown and HTML read as a CommonMark renderer (with inline HTML) shows them.
//!
//! - **HTML tags** (`<b>`, `</span>`, `<wbr>`, `<br/>`, `<a href="…">`) are not shown: a tag
//!   inside a word leaves the word joined (`proj<b>ect</b>`), a tag that breaks a line or a
//!   block (`<br>`, `<p>`, `<div>`, `<li>`, `<td>`, …) reads as a space. What a tag carries
//!   besides its name (attributes: a `title`, an `alt`, a URL) a model reads, so it is written
//!   as an aside (`aside.rs`), not dropped.
//! - **HTML comments** (`<!-- … -->`) are not shown; their text is an aside. Nor are
//!   processing instructions (`<?x?>`), declarations (`<!x>`) and CDATA sections, which a
//!   browser reads as comments up to the first `>` (`forbid<?x?>den` reads `forbidden`); a
//!   `<?` or `<!` + letter starts one at once, so one never waits (a `<?x>` that CommonMark
//!   would show as text is hidden too: a false block at worst).
//! - **Links** `[text](destination "title")`: the brackets are not shown, the text is; the
//!   destination and title are an aside. (`[` and `]` are read as not there wherever they are.)
//! - **Autolinks** (`<https://x>`, `<a@b.c>`): the link is shown without its angle brackets.
//! - **Backslash escapes** (`\*`, `\_`, `\<`): the punctuation is shown as text (never markup);
//!   a backslash before a line break is a hard break.
//!
//! - **Ruby annotations and `<bdo>`** move text rather than hide it (`html/elements.rs`), and
//!   so does a table's text outside its cells (`html/table.rs`).
//!
//! The tag reader (a `<` construct up to its end, what a finished tag shows) is `html/tag.rs`;
//! the syntax tables (raw-text, block and void elements, attributes) are `html/syntax.rs`.
//!
//! A construct waits while it is read: a tag up to [`MAX_TAG`] characters (longer, or with a
//! character no tag has, it is text as written, as CommonMark shows it); the hidden text of a
//! comment, a tag's attributes or a link destination is written as an aside every
//! [`MAX_HIDDEN`] characters and at its end, so nothing waits longer than that.

mod attributes;
pub(super) use attributes::SvgDataUrl;
mod blocks;
pub(super) use blocks::LineLead;
pub(super) mod css;
pub(super) use css::StyleSheet;
mod elements;
pub(super) use elements::OpenElement;
mod syntax;
mod table;
pub(super) use table::Table;
mod literal;
mod paragraph;
mod reread;
pub(super) use reread::Reread;
mod tag;
mod tree;

pub(super) use syntax::{attr, not_shown, Destination, RAW_TEXT, VOID};

use super::chars::is_paragraph_end;
use super::{Normalizer, Unit};

/// The longest tag name (and `<`, `/`) read as a tag.
const MAX_TAG: usize = 40;

/// Hidden text is written as an aside at least this often.
pub(super) const MAX_HIDDEN: usize = 256;

/// `text` without what looks like tags and comments (`<` + a letter, `/`, `!` or `?`, up to
/// the next `>`), as a reader of the markup in hidden text sees it.
fn without_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let tag =
            after.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'));
        match after.find('>').filter(|_| tag) {
            Some(end) => rest = &after[end + 1..],
            None => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A script's states (WHATWG HTML's script data states): data, escaped (after `<!--`), double
/// escaped (after `<!--` and `<script`).
const SCRIPT_ESCAPED: u8 = 1;
const SCRIPT_DOUBLE_ESCAPED: u8 = 2;

/// Characters of hidden text an aside cut at [`MAX_HIDDEN`] writes again at the start of
/// the next (as many as the view writes again after an aside).
pub(super) const HIDDEN_OVERLAP: usize = super::aside::REPLAY;

/// What the markup reader is in the middle of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Markup {
    #[default]
    Text,
    /// A `<` construct being read (in `tag`).
    Tag,
    /// A tag's attributes, up to its `>` (`quote`: inside a quoted value).
    /// (`after_eq`: where in an attribute the reader is, [`attr`]; a quote opens a value only
    /// right after a name's `=` — anywhere else a browser reads
    /// a quote as a character, and the next `>` ends the tag).
    Attributes {
        quote: Option<char>,
        block: bool,
        after_eq: u8,
    },
    /// A comment's text, up to `-->` or a browser's `--!>` (`dashes`: how many `-` came last;
    /// `bang`: a `!` after two of them; `read`: characters read, up to 2 — `<!-->` and
    /// `<!--->` are empty comments).
    Comment { dashes: u8, bang: bool, read: u8 },
    /// A processing instruction (`<?…?>`), a declaration (`<!X…>`) or a CDATA section
    /// (`<![CDATA[…]]>`): raw HTML to CommonMark, a bogus comment to a browser, which hides it
    /// up to the first `>`.
    Bogus,
    /// A link's destination and title, up to the `)` that closes the `(`.
    Destination(Destination),
    /// An autolink's text, up to its `>`.
    Autolink,
    /// The content of a raw-text element ([`RAW_TEXT`]`[element]`), up to its end tag
    /// (`matched`: how many characters of `</name` came last).
    RawText { element: u8, matched: u8 },
    /// Text a browser shows as written, markup and references too (`literal.rs`).
    Literal(Literal),
}

/// What shows its text as written: a CDATA section in foreign content (up to `]]>`), an
/// `<xmp>` (up to `</xmp>`), a `<plaintext>` (to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Literal {
    Cdata,
    Xmp,
    Plaintext,
}

impl Normalizer {
    /// The markup stage for one character (`full`); `spelled`: the character came from a
    /// reference or a carrier, so it is text (never markup) — but hidden if it comes inside a
    /// comment, a tag or a destination.
    pub(super) fn html_char(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        spelled: bool,
        out: &mut String,
    ) {
        let unit = Unit {
            c,
            raw,
            raw_end,
            exact: true,
        };
        // A link reference definition's URL (`[r]: data:image/svg+xml,…`, in angle brackets
        // too), to its line's end.
        if let Some(url) = self.definition_url.as_mut() {
            if c == '\n' || c == '\r' {
                self.definition_url = None;
            } else if url.read(c) {
                self.refuse(raw, raw_end);
                self.definition_url = None;
            }
        }
        if self.reread.is_some()
            || matches!(
                self.markup,
                Markup::Comment { .. } | Markup::Bogus | Markup::Literal(Literal::Cdata)
            )
        {
            self.reread_char(c, raw_end, spelled, out);
        }
        if matches!(self.markup, Markup::Tag | Markup::Attributes { .. }) {
            self.tag_raw_push(c);
        } else if !self.tag_raw.is_empty() {
            // The `<` was no tag's (a comment, an autolink, text).
            self.tag_raw.clear();
        }
        match self.markup {
            Markup::Text => {}
            Markup::Tag => {
                if !spelled && self.tag_continues(c, unit, out) {
                    return;
                }
                self.tag_as_text(out);
            }
            Markup::Attributes {
                quote,
                block,
                after_eq,
            } => {
                let slash = std::mem::take(&mut self.self_closing);
                let (quote, after_eq) = match quote {
                    // A quoted value ends; what follows starts the next attribute.
                    Some(q) if c == q => (None, attr::BEFORE_NAME),
                    Some(q) => {
                        self.attribute_value_char(c);
                        (Some(q), attr::BEFORE_NAME)
                    }
                    None if !spelled && c == '>' => {
                        self.self_closing = slash;
                        self.attribute_name_ends();
                        self.end_hidden(out);
                        self.markup = match self.raw_text.take() {
                            Some(element) => Markup::RawText {
                                element,
                                matched: 0,
                            },
                            None => Markup::Text,
                        };
                        // (`hidden`: a browser shows nothing of the element up to its end,
                        // which Markdown's constructs around it may make: read as a style
                        // that may hide it is, `elements.rs`.)
                        self.tag_shown(block, raw, raw_end, out);
                        self.hidden_attribute = false;
                        return;
                    }
                    None if spelled => (None, attr::next(after_eq, 'x')),
                    None if after_eq == attr::BEFORE_VALUE && (c == '"' || c == '\'') => {
                        (Some(c), attr::BEFORE_NAME)
                    }
                    None => {
                        let next = attr::next(after_eq, c);
                        self.self_closing = c == '/' && next != attr::UNQUOTED;
                        if next == attr::UNQUOTED {
                            self.attribute_value_char(c);
                        }
                        if next == attr::NAME {
                            if after_eq != attr::NAME {
                                self.attribute_name.clear();
                                self.dir_attribute = false;
                                self.encoding_attribute = false;
                            }
                            // (Long enough for the longest name read: `stroke-opacity`.)
                            if self.attribute_name.len() < 16 {
                                self.attribute_name.push(c.to_ascii_lowercase());
                            }
                        } else if after_eq == attr::NAME {
                            self.attribute_name_ends();
                        }
                        (None, next)
                    }
                };
                self.markup = Markup::Attributes {
                    quote,
                    block,
                    after_eq,
                };
                return self.hide(unit, out);
            }
            Markup::Comment { dashes, bang, read } => {
                let empty = read == 0 || (read == 1 && dashes == 1);
                if !spelled && c == '>' && (dashes >= 2 || bang || empty) {
                    let closing = if bang { 3 } else { usize::from(dashes.min(2)) };
                    let keep = self.hidden.len().saturating_sub(closing);
                    self.hidden.truncate(keep);
                    self.end_hidden(out);
                    self.markup = Markup::Text;
                    return;
                }
                let bang = !spelled && c == '!' && dashes >= 2;
                let dashes = if !spelled && c == '-' {
                    dashes.saturating_add(1)
                } else {
                    0
                };
                let read = read.saturating_add(1).min(2);
                self.markup = Markup::Comment { dashes, bang, read };
                return self.hide(unit, out);
            }
            Markup::RawText { element, matched } => {
                let name = RAW_TEXT[usize::from(element)];
                let close = 2 + name.len();
                let wanted = match usize::from(matched) {
                    0 => Some('<'),
                    1 => Some('/'),
                    i => name.as_bytes().get(i - 2).map(|b| char::from(*b)),
                };
                let sheet = name == "style";
                // A script's end tag ends it unless the script is "double escaped" (after
                // `<!--<script>` in it, up to `</script>` or `-->`), as a browser reads it.
                let double_escaped = name == "script" && !spelled && self.script_char(c);
                if usize::from(matched) == close
                    && !spelled
                    && !double_escaped
                    && (c == '>' || c == '/' || c.is_whitespace())
                {
                    self.script_tail.clear();
                    self.script_state = 0;
                    if sheet {
                        self.style_sheet_ended(raw_end);
                    }
                    let keep = self.hidden.len().saturating_sub(close);
                    self.hidden.truncate(keep);
                    self.end_hidden(out);
                    // An end tag's attributes hide nothing (`</span hidden>`).
                    self.hidden_element.clear();
                    self.attribute_name.clear();
                    self.hidden_attribute = false;
                    // The end tag closes the element (as any end tag, where it ends).
                    self.element_named(name, true);
                    self.tag_raw_at = self.raw_text_end_at;
                    self.markup = match c {
                        '>' => Markup::Text,
                        _ => Markup::Attributes {
                            quote: None,
                            block: false,
                            after_eq: attr::BEFORE_NAME,
                        },
                    };
                    if c == '>' {
                        self.tag_shown(false, self.raw_text_end_at, raw_end, out);
                    }
                    return;
                }
                let matched = if spelled {
                    0
                } else if wanted == Some(c.to_ascii_lowercase()) {
                    matched + 1
                } else if c == '<' {
                    1
                } else {
                    0
                };
                if matched == 1 {
                    self.raw_text_end_at = raw;
                }
                self.markup = Markup::RawText { element, matched };
                if sheet {
                    self.style_sheet_char(c, raw_end);
                    if self.svg_data_url.read(c) {
                        self.refuse(raw, raw_end);
                    }
                }
                return self.hide(unit, out);
            }
            Markup::Bogus => {
                if !spelled && c == '>' {
                    self.end_hidden(out);
                    self.markup = Markup::Text;
                    return;
                }
                return self.hide(unit, out);
            }
            Markup::Destination(d) => {
                match d.next(c, spelled) {
                    Some(d) => {
                        self.markup = Markup::Destination(d);
                        self.destination_char(c, raw, raw_end);
                        return self.hide(unit, out);
                    }
                    None if c == ')' => {
                        self.end_hidden(out);
                        self.markup = Markup::Text;
                        self.image_end();
                        return;
                    }
                    // A blank line: no link (what was read stays hidden).
                    None => {
                        self.end_hidden(out);
                        self.markup = Markup::Text;
                    }
                }
            }
            Markup::Literal(literal) => return self.literal_char(literal, unit, spelled, out),
            Markup::Autolink => {
                if !spelled && c == '>' {
                    self.markup = Markup::Text;
                    self.close_join(true);
                    return;
                }
                if c.is_whitespace() || c == '<' {
                    self.markup = Markup::Text;
                    self.close_join(false);
                }
            }
        }
        if self.markup == Markup::Text && self.element_text_char(unit, spelled, out) {
            return;
        }
        self.text_markup_char(unit, spelled, out);
    }

    /// A character of the text past the elements' stage: Markdown's block marks at a line's
    /// start (`line_marks.rs`), escapes, references, brackets and emphasis.
    pub(super) fn text_markup_char(&mut self, unit: Unit, spelled: bool, out: &mut String) {
        let Unit {
            c, raw, raw_end, ..
        } = unit;
        if self.line_marks_read(c)
            && self.markup == Markup::Text
            && !self.fragment
            && self.escape.is_none()
            && self.reference.is_empty()
            && self.line_mark_char(unit, spelled, out)
        {
            return;
        }
        if let Some(slash) = self.escape.take() {
            if !spelled && c.is_ascii_punctuation() {
                self.after_bracket = false;
                return self.markup_char(c, slash.raw, raw_end, true, out);
            }
            if spelled || (c != '\n' && c != '\r') {
                self.reference_or_markup('\\', slash.raw, slash.raw_end, out);
            }
        }
        if spelled {
            // A spelled character continues no reference: the one read so far is text.
            self.flush_reference(out);
            self.after_bracket = false;
            return self.markup_char(c, raw, raw_end, true, out);
        }
        let after_bracket = std::mem::take(&mut self.after_bracket);
        if matches!(c, '\\' | '<' | '[' | ']') || (c == '(' && after_bracket) {
            // Markup ends a reference being read (`&amp<b>` is text, then a tag).
            self.flush_reference(out);
        }
        match c {
            '\\' => self.escape = Some(unit),
            '<' => {
                // As after `&`: a `<` after a word lets a `_` run close emphasis (CommonMark
                // reads the characters as written, the tag's among them).
                self.underscores_before_punctuation(out);
                self.tag.push(unit);
                self.markup = Markup::Tag;
                self.tag_raw_start(raw);
            }
            '[' => {
                self.glued_mark(raw, out);
                self.brackets = self.brackets.saturating_add(1);
                self.open_image(raw, self.brackets);
            }
            ']' => {
                self.glued_mark(raw, out);
                self.image_bracket(self.brackets);
                self.after_bracket = self.brackets > 0;
                self.brackets = self.brackets.saturating_sub(1);
            }
            ':' if after_bracket => {
                self.definition_url = Some(super::html::SvgDataUrl::default());
                self.reference_or_markup(c, raw, raw_end, out);
            }
            '(' if after_bracket => {
                self.markup = Markup::Destination(Destination::default());
                self.svg_data_url.clear();
            }
            _ => {
                if is_paragraph_end(c) {
                    self.brackets = 0;
                }
                self.reference_or_markup(c, raw, raw_end, out);
            }
        }
    }

    /// The reference and emphasis stages (`markup.rs`) for a character of the text.
    pub(super) fn reference_or_markup(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) {
        if !self.reference_char(c, raw, raw_end, out) {
            self.markup_char(c, raw, raw_end, false, out);
        }
    }

    /// A character of a script's text: its state moves on (`script_state`); whether the
    /// script was double escaped before it (its end tag then ends nothing).
    fn script_char(&mut self, c: char) -> bool {
        let delimiter = c.is_whitespace() || c == '/' || c == '>';
        let before = self.script_state;
        if delimiter {
            if before == SCRIPT_ESCAPED && self.script_tail.ends_with("<script") {
                self.script_state = SCRIPT_DOUBLE_ESCAPED;
            } else if before == SCRIPT_DOUBLE_ESCAPED && self.script_tail.ends_with("</script") {
                self.script_state = SCRIPT_ESCAPED;
            }
        }
        if self.script_tail.len() >= 16 {
            self.script_tail.drain(..8);
        }
        // (ASCII only, so the cut above is at a character's edge.)
        self.script_tail.push(if c.is_ascii() {
            c.to_ascii_lowercase()
        } else {
            '?'
        });
        if self.script_tail.ends_with("-->") {
            self.script_state = 0;
        } else if before == 0 && self.script_tail.ends_with("<!--") {
            self.script_state = SCRIPT_ESCAPED;
        }
        before == SCRIPT_DOUBLE_ESCAPED
    }

    /// A character of hidden text (written as an aside at its end, or every [`MAX_HIDDEN`]).
    pub(super) fn hide(&mut self, unit: Unit, out: &mut String) {
        self.hidden.push(unit);
        if self.hidden.len() >= MAX_HIDDEN {
            // The next aside starts with this one's last characters, so a phrase through
            // the cut is read whole in one of them (up to [`HIDDEN_OVERLAP`] + 1 characters).
            let overlap = self.hidden[MAX_HIDDEN - HIDDEN_OVERLAP..].to_vec();
            self.end_hidden(out);
            self.hidden.extend(overlap);
        }
    }

    /// Writes the hidden text read so far as an aside.
    pub(super) fn end_hidden(&mut self, out: &mut String) {
        let hidden = std::mem::take(&mut self.hidden);
        // What CommonMark reads before the next character is the construct's last, as written
        // (`>`, `)`): punctuation, which lets a `_` run after it open emphasis (`forbid<b>__den__`).
        if !hidden.is_empty() {
            self.after_spelled = true;
        }
        self.hidden_aside(&hidden, out);
        // (The buffer's room is kept for the next hidden text.)
        self.hidden = hidden;
        self.hidden.clear();
    }

    /// Hidden text read as an aside (`end_hidden`, and the text elements hide read across
    /// their tags, `html/elements.rs`).
    pub(super) fn hidden_aside(&mut self, units: &[Unit], out: &mut String) {
        let (Some(first), Some(last)) = (units.first(), units.last()) else {
            return;
        };
        let (raw, raw_end) = (first.raw, last.raw_end);
        let text: String = units.iter().map(|u| u.c).collect();
        // Punctuation alone (`<br />`'s `/`, an empty title) says nothing.
        if text.chars().any(char::is_alphanumeric) {
            // Its character references decoded (a browser shows an attribute's value, a
            // `<textarea>`'s text, decoded), and the markup inside it read as a reader reads
            // markup (`<!--forbid<b>den</b>-->`): the text without its tags is an aside too.
            let decoded = if text.contains('&') {
                super::markup::decode_references(&text)
            } else {
                text
            };
            self.aside(&decoded, raw, raw_end, out);
            // A raw-text element's text as a browser shows it apart (a `<textarea>`'s, in its
            // element's direction and override), when that order differs. (A tag's values
            // are ordered each on its own, `html/attributes.rs`.)
            if let Some((rtl, overrides)) = self.raw_text_order.take() {
                self.shown_apart(&decoded, rtl, overrides, raw, raw_end, out);
            }
            if decoded.contains('<') {
                let bare = without_tags(&decoded);
                if bare != decoded && bare.chars().any(char::is_alphanumeric) {
                    self.aside(&bare, raw, raw_end, out);
                }
            }
        }
    }

    /// The end of the text: a construct still being read is text as written (a tag), or its
    /// hidden text is an aside; a waiting backslash is text.
    pub(super) fn finish_html(&mut self, out: &mut String) {
        self.reread_at_end(out);
        match self.markup {
            Markup::Tag => self.tag_as_text(out),
            Markup::Attributes { .. } => {
                self.end_hidden(out);
                // Never closed: a browser drops it, a Markdown renderer shows it.
                self.tag_ended(true);
            }
            Markup::Literal(_) => self.literal_at_end(out),
            // A style sheet never closed applies all the same.
            Markup::RawText { element, .. } if RAW_TEXT[usize::from(element)] == "style" => {
                self.end_hidden(out);
                self.style_sheet_ended(self.raw_len);
            }
            // (In text, what an open element hides — a ruby's annotation, foreign content —
            // is hidden text all the same.)
            _ => self.end_hidden(out),
        }
        self.markup = Markup::Text;
        if let Some(slash) = self.escape.take() {
            self.reference_or_markup('\\', slash.raw, slash.raw_end, out);
        }
        self.after_bracket = false;
        self.brackets = 0;
        self.markdown_paragraph_ends(self.raw_len, false);
        self.open_elements.clear();
        self.html_open.clear();
        self.annotation_hidden = false;
        self.element_hidden_ends(out);
    }
}
