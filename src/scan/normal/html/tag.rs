//! The tag reader of the markup stage (`full`): a `<` construct read up to its end, as a
//! browser reads tags (names, attributes, end tags, comments and bogus comments, autolinks);
//! what a finished tag shows (nothing, or a break between words) and which element it opens.

use super::syntax::{attr, html_space, BLOCK_TAGS, RAW_TEXT};
use super::{Literal, Markup, MAX_TAG};
use crate::scan::normal::{Normalizer, Unit};

impl Normalizer {
    /// Whether `c` continues the `<` construct read so far (taking it).
    pub(super) fn tag_continues(&mut self, c: char, unit: Unit, out: &mut String) -> bool {
        let body: Vec<char> = self.tag[1..].iter().map(|u| u.c).collect();
        // A browser's tag name: after its first (ASCII) letter, anything up to white space,
        // `/` or `>` (`<o:p>`, `<b.x>`, `<bé>`); CommonMark's stricter names are among them.
        let name_char = |c: char| !html_space(c) && c != '/' && c != '>';
        let closing = body.first() == Some(&'/');
        let name = if closing { &body[1..] } else { &body[..] };
        let ends_void = name.last() == Some(&'/');
        if name.len() > MAX_TAG {
            // A browser hides a tag whatever its name's length: past the bound the rest of the
            // tag is read as its (hidden) attributes rather than wait for the name to end.
            if !name.first().is_some_and(char::is_ascii_alphabetic) {
                return false;
            }
            self.hide_name(out);
            self.tag.clear();
            self.raw_text = None;
            if c == '>' {
                self.end_hidden(out);
                self.markup = Markup::Text;
                return true;
            }
            self.markup = Markup::Attributes {
                quote: None,
                block: false,
                after_eq: attr::next(attr::BEFORE_NAME, 'x'),
            };
            self.hide(unit, out);
            return true;
        }
        match (name, c) {
            ([], '!') if !closing => self.tag.push(unit),
            // In foreign content `<![CDATA[` opens a CDATA section, its text shown as written
            // (`literal.rs`); elsewhere a bogus comment.
            (['!'], '[') if self.in_foreign_content() => self.tag.push(unit),
            (['!', '[', read @ ..], c) => {
                const OPENER: &str = "CDATA[";
                let read: String = read.iter().chain([&c]).collect();
                if read == OPENER {
                    self.tag.clear();
                    self.markup = Markup::Literal(Literal::Cdata);
                } else if OPENER.starts_with(&read) {
                    self.tag.push(unit);
                } else {
                    let read: Vec<Unit> = self.tag.drain(2..).collect();
                    self.tag.clear();
                    self.markup = Markup::Bogus;
                    for u in read {
                        self.hide(u, out);
                    }
                    if c == '>' {
                        self.end_hidden(out);
                        self.markup = Markup::Text;
                    } else {
                        self.hide(unit, out);
                    }
                }
            }
            ([], '?') if !closing => {
                self.tag.clear();
                self.markup = Markup::Bogus;
            }
            // `<!>` and `<!->`: empty comments to a browser.
            (['!'] | ['!', '-'], '>') => {
                self.tag.clear();
                self.markup = Markup::Text;
            }
            (['!', '-'], c) if c != '-' => {
                self.tag.clear();
                self.markup = Markup::Bogus;
                self.hide(unit, out);
            }
            // `<!` + anything but `-` (and `>`, above): a bogus comment to a browser.
            (['!'], c) if c != '-' => {
                self.tag.clear();
                self.markup = Markup::Bogus;
                self.hide(unit, out);
            }
            (['!'], '-') => self.tag.push(unit),
            (['!', '-'], '-') => {
                self.tag.clear();
                self.markup = Markup::Comment {
                    dashes: 0,
                    bang: false,
                    read: 0,
                };
            }
            ([], '/') if !closing => self.tag.push(unit),
            // A browser shows nothing of `</>`, and reads `</` + a non-letter as a comment up
            // to the next `>` (CommonMark shows both as text: the person's view hides them).
            ([], '>') if closing => {
                self.tag.clear();
                self.markup = Markup::Text;
            }
            ([], c) if closing && !c.is_ascii_alphabetic() => {
                self.tag.clear();
                self.markup = Markup::Bogus;
                self.hide(unit, out);
            }
            ([], c) if c.is_ascii_alphabetic() => self.tag.push(unit),
            // `<a/title=">">`: a `/` not followed by `>` starts the attributes, as a browser
            // reads it.
            ([first, ..], c) if first.is_ascii_alphabetic() && ends_void && c != '>' => {
                let block = self.read_tag_name(closing);
                self.hide_name(out);
                self.tag.clear();
                let after_eq = attr::next(attr::BEFORE_NAME, c);
                self.self_closing = c == '/';
                // The attribute's name starts with `c` (`<bdo/dir=rtl>`).
                self.attribute_name.clear();
                if after_eq == attr::NAME {
                    self.attribute_name.push(c.to_ascii_lowercase());
                }
                self.markup = Markup::Attributes {
                    quote: None,
                    block,
                    after_eq,
                };
                self.hide(unit, out);
            }
            ([first, ..], c) if first.is_ascii_alphabetic() && !ends_void => {
                // An autolink's scheme has 2 to 32 characters (`<o:p>` is a tag).
                let autolink = (c == ':' && name.len() >= 2) || c == '@';
                if !autolink && (name_char(c) || (c == '/' && !closing)) {
                    self.tag.push(unit);
                } else if c == '>' {
                    self.self_closing = false;
                    let block = self.read_tag_name(closing);
                    let element = self.raw_text_element(closing);
                    let (raw, raw_end) = (self.tag[0].raw, unit.raw_end);
                    self.hide_name(out);
                    self.end_hidden(out);
                    self.tag.clear();
                    self.markup = match element {
                        Some(element) => Markup::RawText {
                            element,
                            matched: 0,
                        },
                        None => Markup::Text,
                    };
                    self.tag_shown(block, raw, raw_end, out);
                } else if html_space(c) || (c == '/' && closing) {
                    // An end tag's attributes (and a `/` after its name) are ignored by a
                    // browser, hidden all the same.
                    let block = self.read_tag_name(closing);
                    self.raw_text = self.raw_text_element(closing);
                    // The element a `hidden` attribute would hide (a start tag's).
                    self.hidden_element.clear();
                    if !closing {
                        self.hidden_element
                            .extend(self.tag.iter().skip(1).map(|u| u.c.to_ascii_lowercase()));
                    }
                    self.attribute_name.clear();
                    self.hidden_attribute = false;
                    self.hide_name(out);
                    self.hide(unit, out);
                    self.tag.clear();
                    self.markup = Markup::Attributes {
                        quote: None,
                        block,
                        after_eq: attr::BEFORE_NAME,
                    };
                } else if (c == ':' || c == '@') && !closing {
                    // An autolink (`<https://…>`, `<a@b.c>`): shown without its brackets (a
                    // browser hides it: its reading is an aside, `join.rs`).
                    self.open_join(self.tag[0].raw);
                    let shown: Vec<Unit> = self.tag.drain(1..).collect();
                    self.tag.clear();
                    self.markup = Markup::Autolink;
                    for u in shown {
                        self.reference_or_markup(u.c, u.raw, u.raw_end, out);
                    }
                    self.reference_or_markup(c, unit.raw, unit.raw_end, out);
                } else {
                    return false;
                }
            }
            (_, '>') if ends_void => {
                self.self_closing = !closing;
                let block = self.read_tag_name(closing);
                let (raw, raw_end) = (self.tag[0].raw, unit.raw_end);
                self.hide_name(out);
                self.end_hidden(out);
                self.tag.clear();
                self.markup = Markup::Text;
                self.tag_shown(block, raw, raw_end, out);
            }
            _ => return false,
        }
        true
    }

    /// An attribute's name ended: a `hidden` one hides its element.
    pub(super) fn attribute_name_ends(&mut self) {
        if self.attribute_name == "hidden" {
            self.hidden_attribute = true;
        }
        // A declarative shadow root (`<template shadowrootmode=open>`; `shadowroot` in older
        // browsers): a browser parsing the page shows the template's content, its `<slot>`s
        // placing the host's children in the order they say, under its own style sheet. Not
        // read: refused.
        if self.hidden_element == "template"
            && matches!(
                self.attribute_name.as_str(),
                "shadowrootmode" | "shadowroot"
            )
        {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
        // The first `dir` counts, as a browser takes the first of an attribute.
        self.dir_attribute = self.attribute_name == "dir" && self.dir_value.is_empty();
        // (And the first `encoding`: a MathML `<annotation-xml>` may hold HTML.)
        if self.attribute_name == "encoding" && self.encoding_value.is_none() {
            self.encoding_value = Some(String::new());
            self.encoding_attribute = true;
        } else {
            self.encoding_attribute = false;
        }
        self.attribute_named();
        self.attribute_name.clear();
    }

    /// The raw-text element ([`RAW_TEXT`]) a start tag read so far opens, if any.
    pub(super) fn raw_text_element(&self, closing: bool) -> Option<u8> {
        if closing {
            return None;
        }
        let name: String = self
            .tag
            .iter()
            .skip(1)
            .map(|u| u.c.to_ascii_lowercase())
            .collect();
        // In foreign content a `<script>` or a `<title>` is an element as any (an SVG or MathML
        // one, its content parsed); a `<style>` there still styles the page.
        let space = self.start_tag_space(&name);
        if space != super::tree::Space::Html && name != "style" {
            return None;
        }
        RAW_TEXT
            .iter()
            .position(|r| *r == name)
            .and_then(|i| u8::try_from(i).ok())
    }

    /// Whether the tag read so far (its name) breaks a line or a block; notes a `<wbr>`.
    pub(super) fn read_tag_name(&mut self, closing: bool) -> bool {
        let skip = if closing { 2 } else { 1 };
        let name: String = self
            .tag
            .iter()
            .skip(skip)
            .map(|u| u.c.to_ascii_lowercase())
            .filter(|&c| c != '/')
            .collect();
        self.wbr = !closing && name == "wbr";
        self.element_named(&name, closing);
        BLOCK_TAGS.contains(&name.as_str())
    }

    /// A tag's name is not shown, but a model reads it (`<ignore-previous-instructions>`):
    /// it is hidden text, written as an aside as the attributes are.
    pub(super) fn hide_name(&mut self, out: &mut String) {
        let name: Vec<Unit> = self.tag[1..]
            .iter()
            .filter(|u| u.c != '/')
            .copied()
            .collect();
        for u in name {
            self.hide(u, out);
        }
    }

    /// A whole tag was read: it shows nothing, or a break between words.
    pub(super) fn tag_shown(&mut self, block: bool, raw: u64, raw_end: u64, out: &mut String) {
        // A block inside text a browser hides (a template's `<div>`) breaks no line.
        let hidden_before = self.annotation_hidden;
        let waiting_before = self.browser_waiting();
        self.element_ended(raw_end, out);
        // An element a style hid ends at a block tag: no break in the browser's reading.
        if block && waiting_before && !self.browser_waiting() {
            self.browser_reading_trims();
        }
        let ignored = std::mem::take(&mut self.ignored_tag);
        if block && !(hidden_before && self.annotation_hidden) && !ignored {
            // A block a style displays otherwise, an end tag that may close nothing: the
            // words around its tag may join.
            if let Some(unbroken) = self.break_in_doubt.take() {
                self.join_across_block(raw, unbroken);
            }
            self.markup_char(' ', raw, raw_end, true, out);
        }
        self.break_in_doubt = None;
        // A browser lays `<wbr>` out as a U+200B: a line break next to it shows as nothing
        // (`segment.rs`).
        if std::mem::take(&mut self.wbr) {
            self.wbr_read(raw);
        }
        // A tag CommonMark does not read as one is text to a Markdown renderer (`join.rs`).
        self.tag_ended(false);
    }

    /// The `<` construct read so far is text as written.
    pub(super) fn tag_as_text(&mut self, out: &mut String) {
        self.markup = Markup::Text;
        let read = std::mem::take(&mut self.tag);
        for u in read {
            self.reference_or_markup(u.c, u.raw, u.raw_end, out);
        }
    }
}
