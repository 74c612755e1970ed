//! The HTML and CommonMark syntax the markup reader (`html.rs`) follows, apart from its
//! state: a link destination's grammar, a tag's attributes' states, and the elements a browser
//! treats apart (not displayed, void, or a break between words).

use crate::scan::normal::chars::is_paragraph_end;

/// Where the reader is in a link's `(destination "title")` (CommonMark 6.3): a destination in
/// `<…>` or raw (parentheses balanced), then an optional title in `"…"`, `'…'` or `(…)`,
/// backslash escapes everywhere, line breaks but no blank line; the `)` after them ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::scan::normal) struct Destination {
    phase: u8,
    depth: u8,
    close: char,
    escape: bool,
    line_break: bool,
}

impl Destination {
    const BEFORE: u8 = 0;
    const ANGLE: u8 = 1;
    const RAW: u8 = 2;
    const AFTER: u8 = 3;
    const TITLE: u8 = 4;

    /// The state after `c`; `None`: the link ends here (its `)`, or a blank line).
    pub(super) fn next(mut self, c: char, spelled: bool) -> Option<Destination> {
        if spelled {
            if self.phase == Self::BEFORE || self.phase == Self::AFTER {
                self.phase = Self::RAW;
            }
            return Some(self);
        }
        if self.escape {
            self.escape = false;
            return Some(self);
        }
        let space = c.is_whitespace();
        if is_paragraph_end(c) {
            if self.line_break {
                return None;
            }
            self.line_break = true;
        } else if !space {
            self.line_break = false;
        }
        if c == '\\' && self.phase != Self::BEFORE && self.phase != Self::AFTER {
            self.escape = true;
            return Some(self);
        }
        match self.phase {
            Self::BEFORE | Self::AFTER if space => {}
            Self::BEFORE if c == '<' => self.phase = Self::ANGLE,
            Self::BEFORE | Self::AFTER if c == ')' => return None,
            Self::AFTER if c == '"' || c == '\'' => {
                self.phase = Self::TITLE;
                self.close = c;
            }
            Self::AFTER if c == '(' => {
                self.phase = Self::TITLE;
                self.close = ')';
            }
            Self::ANGLE if c == '>' => self.phase = Self::AFTER,
            Self::ANGLE => {}
            Self::TITLE if c == self.close => self.phase = Self::AFTER,
            Self::TITLE => {}
            // A raw destination (or what follows a title: not CommonMark's, read as one).
            _ => {
                self.phase = Self::RAW;
                match c {
                    _ if space => self.phase = Self::AFTER,
                    '(' => self.depth = self.depth.saturating_add(1),
                    ')' if self.depth == 0 => return None,
                    ')' => self.depth -= 1,
                    _ => {}
                }
            }
        }
        Some(self)
    }
}

/// Where a browser's tokenizer is among a tag's attributes (WHATWG 13.2.5.32–.39), so that a
/// quote opens a value only where it does: right after a name's `=`.
pub(in crate::scan::normal) mod attr {
    pub const BEFORE_NAME: u8 = 0;
    pub const NAME: u8 = 1;
    const AFTER_NAME: u8 = 2;
    pub const BEFORE_VALUE: u8 = 3;
    pub const UNQUOTED: u8 = 4;

    /// The state after `c` (not `>`, not an opening quote).
    pub fn next(state: u8, c: char) -> u8 {
        let space = super::html_space(c);
        match state {
            NAME | AFTER_NAME if c == '=' => BEFORE_VALUE,
            NAME | AFTER_NAME if space => AFTER_NAME,
            BEFORE_VALUE if space => BEFORE_VALUE,
            BEFORE_VALUE | UNQUOTED if !space => UNQUOTED,
            _ if c == '/' || space => BEFORE_NAME,
            // In a name (an `=` or a quote first in one is a character of it).
            _ => NAME,
        }
    }
}

/// HTML's white space (tab, line feed, form feed, carriage return, space): what ends a tag
/// name or an attribute; every other character (NBSP, U+3000) belongs to it.
pub(in crate::scan::normal) fn html_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ')
}

/// Elements whose content a browser does not show (scripts, styles, the title, …): hidden up
/// to their end tag, their text an aside. (A `<template>`'s content is parsed as HTML, other
/// templates nested in it: it is an element that hides its text, `elements.rs`.)
pub(in crate::scan::normal) const RAW_TEXT: [&str; 8] = [
    "script", "style", "title", "iframe", "noembed", "noframes",
    // Raw text where scripts run, as in every person's browser.
    "noscript", // Shown in a box of its own, apart from the words around it.
    "textarea",
];

/// Elements whose content a browser does not show — not displayed by its own style sheet (a
/// `<datalist>`, a closed `<dialog>`), or fallback content for a browser without what the
/// element shows — parsed as any element (an end tag around them closes them): their text is
/// hidden while they are open (`elements.rs`; a style that may show them is refused).
pub(in crate::scan::normal) const HIDDEN_BY_KIND: [&str; 7] = [
    "datalist", "dialog", "video", "audio", "canvas", "meter", "progress",
];

/// Whether a browser shows nothing of an element `name`'s content by its kind alone (raw
/// text, [`HIDDEN_BY_KIND`], a `<template>`'s content).
pub(in crate::scan::normal) fn not_shown(name: &str) -> bool {
    RAW_TEXT.contains(&name) || HIDDEN_BY_KIND.contains(&name) || name == "template"
}

/// Elements whose content a browser may show or not — an `<object>`'s fallback, shown when
/// its data does not load; a `<select>`'s chosen option, drawn as a control: read in doubt, as
/// an element a style may hide (`elements.rs`).
pub(in crate::scan::normal) const SHOWN_IN_DOUBT: [&str; 2] = ["object", "select"];

/// Elements without content or end tag: a `hidden` attribute on one hides nothing after it.
pub(in crate::scan::normal) const VOID: [&str; 13] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Tags a renderer shows as a break between words.
pub(super) const BLOCK_TAGS: [&str; 38] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "caption",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "td",
    "th",
    "tr",
    "ul",
];

/// Elements a browser draws apart from the words around them that the view reads no break for:
/// a quote's marks, controls and replaced elements (a box), and blocks of the UA style sheet
/// read in line (`syntax.rs`'s `BLOCK_TAGS` have their break).
#[rustfmt::skip]
pub(super) const SEPARATED: [&str; 34] = [
    "q", "input", "button", "select", "textarea", "meter", "progress", "img", "video", "audio",
    "canvas", "iframe", "embed", "object", "fencedframe", "center", "menu", "dir", "listing",
    "search", "hgroup", "legend", "option", "optgroup", "xmp", "plaintext", "marquee",
    // (An `<svg>`'s box; MathML's formula and its tokens, each laid out as a box of its own.)
    "svg", "math", "mi", "mo", "mn", "ms", "mtext",
];
