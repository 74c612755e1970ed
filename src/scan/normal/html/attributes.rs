//! A start tag's attributes: the values read for CSS (`style`, `class`, `id`, SVG's
//! presentation attributes: `css.rs`), its `dir`, and the text of its values as a browser
//! shows some of them apart from the text around them — an `<input>`'s `value` and
//! `placeholder`, an image's `alt` — in their own order: by the bidi controls in them, in the
//! element's direction, and reversed or forced by the element's own override
//! (`unicode-bidi: bidi-override`). That order is an aside (`bidi.rs`'s `shown_apart`).
//! A `<link>` to a style sheet (its values say `stylesheet`) is refused: a sheet the view
//! cannot read may hide or reorder any text, before the link too.

use super::super::bidi::has_bidi_control;
use super::super::markup::decode_references;
use super::super::Normalizer;

/// The attribute values read for CSS ([`Normalizer::attribute_named`]).
pub(super) const STYLE: u8 = 1;
pub(super) const CLASS: u8 = 2;
pub(super) const ID: u8 = 3;
pub(super) const PRESENTATION_BIDI: u8 = 4;

/// A direction an element sets (its `dir`, its style), which the elements inside inherit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    Ltr,
    Rtl,
    /// `dir=auto`: the direction of the first strong character inside.
    Auto,
}

impl Direction {
    /// A style's direction (`Some(true)`: right to left).
    pub(super) fn of_style(rtl: Option<bool>) -> Option<Direction> {
        rtl.map(|rtl| if rtl { Direction::Rtl } else { Direction::Ltr })
    }

    /// Right to left (`None`: `auto`, the first strong character's).
    pub(super) fn is_rtl(self) -> Option<bool> {
        match self {
            Direction::Ltr => Some(false),
            Direction::Rtl => Some(true),
            Direction::Auto => None,
        }
    }
}

/// A start tag's attribute values kept (their text, for the order a browser shows them in).
const MAX_ATTRIBUTE_TEXT: usize = 1024;

/// SVG's presentation attributes that can hide, shrink or move text: an element in foreign
/// content with one may hide its text.
#[rustfmt::skip]
const PRESENTATION: [&str; 20] = [
    "display", "visibility", "opacity", "fill", "fill-opacity", "stroke", "stroke-opacity",
    "font-size", "font", "transform", "clip-path", "mask", "filter",
    "x", "y", "dx", "dy", "textlength", "lengthadjust", "rotate",
];

/// A `style` value's characters read (a longer one is read as hiding).
pub(super) const MAX_STYLE: usize = 512;

/// A `class` or `id` value's characters kept.
const MAX_CLASS: usize = 256;

/// A `dir` value's characters kept (references in it decoded when the tag ends).
const MAX_DIR: usize = 32;

impl Normalizer {
    /// A character of an attribute's value: kept with the tag's values (up to their bound), and
    /// apart when it is a `dir`'s, a `style`'s, a `class`'s or an `id`'s.
    pub(in crate::scan::normal) fn attribute_value_char(&mut self, c: char) {
        if self.svg_data_url.read(c) {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
        // (One past the bound is kept: a longer text is known to be cut.)
        if self.attribute_values.len() <= MAX_ATTRIBUTE_TEXT {
            self.attribute_values.push(c);
        }
        if self.dir_attribute && self.dir_value.len() < MAX_DIR {
            self.dir_value.push(c);
        }
        if let Some(v) = self.encoding_value.as_mut().filter(|v| v.len() <= MAX_DIR) {
            if self.encoding_attribute {
                v.push(c);
            }
        }
        let (value, max) = match self.css_value {
            STYLE => (&mut self.style_value, MAX_STYLE),
            CLASS => (&mut self.class_value, MAX_CLASS),
            ID => (&mut self.id_value, MAX_CLASS),
            PRESENTATION_BIDI => (&mut self.presentation_value, MAX_CLASS),
            _ => return,
        };
        // (One past the bound is kept: a style longer than it is read as hiding.)
        if value.len() <= max {
            value.push(c);
        }
    }

    /// An attribute's name ended: a `srcdoc`; which of `style`, `class` and `id` its value is
    /// (the first of each counts, as a browser takes it); and its value starts a paragraph of
    /// the tag's values.
    pub(in crate::scan::normal) fn attribute_named(&mut self) {
        self.svg_data_url.clear();
        if self.attribute_name == "srcdoc" {
            self.tag_srcdoc = true;
        }
        // Each value is a paragraph of its own.
        if !self.attribute_values.is_empty() && !self.attribute_values.ends_with('\u{2029}') {
            self.attribute_values.push('\u{2029}');
        }
        // Attributes that style the element as a style would (SVG's presentation attributes):
        // in foreign content, it may hide its text.
        if PRESENTATION.contains(&self.attribute_name.as_str()) {
            self.tag_may_hide = true;
        }
        self.css_value = match self.attribute_name.as_str() {
            "style" if self.style_value.is_empty() => STYLE,
            "class" if self.class_value.is_empty() => CLASS,
            "id" if self.id_value.is_empty() => ID,
            name @ ("direction" | "unicode-bidi" | "x" | "y" | "dx" | "dy" | "rotate")
                if self.presentation_value.len() < MAX_CLASS =>
            {
                self.presentation_value.push(';');
                self.presentation_value.push_str(name);
                self.presentation_value.push(':');
                PRESENTATION_BIDI
            }
            _ => 0,
        };
        // A `style` attribute with no value says nothing; one read is marked, so an empty
        // value (`style=""`) is not taken for a second one.
        if self.css_value == STYLE {
            self.style_value.push(' ');
        }
    }

    /// Whether the presentation attributes read place an SVG text's glyphs one by one (an `x`,
    /// `y`, `dx`, `dy` or `rotate` with a list of values: `x="0 22 132"` draws `fruit forbidden`
    /// as any anagram of its letters) or a run inside a text (a `<tspan>`'s or `<textPath>`'s
    /// position: `den fruit<tspan dx="-162">forbid</tspan>`), or were too many to read.
    pub(super) fn glyphs_placed(&self, element: &str) -> bool {
        let value = decode_references(&self.presentation_value);
        let run = matches!(element, "tspan" | "textpath");
        self.presentation_value.len() >= MAX_CLASS
            || value
                .split(';')
                .filter_map(|d| d.split_once(':'))
                .filter(|(property, _)| matches!(*property, "x" | "y" | "dx" | "dy" | "rotate"))
                .any(|(property, v)| {
                    (run && property != "rotate")
                        || v.split(|c: char| c.is_whitespace() || c == ',')
                            .filter(|t| !t.is_empty())
                            .nth(1)
                            .is_some()
                })
    }

    /// A `<link>`: one to a style sheet is refused (the sheet is not read; it may hide or
    /// reorder any text, and applies to the text before it too). A tag whose values were too
    /// long to keep is read as one.
    pub(super) fn linked_sheet(&mut self) {
        if self
            .values_read()
            .is_none_or(|values| values.contains("stylesheet"))
        {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
    }

    /// The tag's values as a browser reads them (references decoded), in lower case; none when
    /// they were too long to keep.
    fn values_read(&self) -> Option<String> {
        (self.attribute_values.len() <= MAX_ATTRIBUTE_TEXT)
            .then(|| decode_references(&self.attribute_values).to_ascii_lowercase())
    }

    /// A frame, an object or an embed that holds a document of its own (`srcdoc`, a `data:`
    /// URL: a person sees it rendered, as a page of its own): not read, refused.
    pub(super) fn embedded_document(&mut self, name: &str) {
        let srcdoc = std::mem::take(&mut self.tag_srcdoc);
        if !matches!(name, "iframe" | "frame" | "object" | "embed") {
            return;
        }
        // (As the URL parser reads one: tabs and line breaks anywhere dropped, leading
        // controls and spaces trimmed.)
        let data = |values: String| {
            values.split('\u{2029}').any(|v| {
                let v: String = v
                    .chars()
                    .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
                    .collect();
                v.trim_start_matches(|c: char| c <= ' ')
                    .starts_with("data:")
            })
        };
        if srcdoc || self.values_read().is_none_or(data) {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
    }

    /// A character of a link's destination (Markdown's `[x](…)` and `![x](…)`): one naming an
    /// SVG image in a `data:` URL is refused, as in a tag's values.
    pub(super) fn destination_char(&mut self, c: char, raw: u64, raw_end: u64) {
        if self.svg_data_url.read(c) {
            self.refuse(raw, raw_end);
        }
    }

    /// A start tag ended: its attribute values as a browser shows them apart (an input's
    /// value, an image's `alt`), ordered in the element's direction and by its override
    /// (`overrides`), when that order differs from the written one. Values too long to keep
    /// under an override are refused.
    pub(super) fn attributes_shown(
        &mut self,
        own: Option<Direction>,
        overrides: bool,
        raw_end: u64,
        out: &mut String,
    ) {
        // Without an override, only values that may hold a bidi control (or a reference to
        // one) have another order: most tags cost no decoding, no direction looked up.
        if self.attribute_values.is_empty()
            || !(overrides
                || self.attribute_values.contains('&')
                || has_bidi_control(&self.attribute_values))
        {
            return;
        }
        let direction = own.or_else(|| self.inherited_direction());
        let values = std::mem::take(&mut self.attribute_values);
        // Too long to keep, or forced in a direction its first strong character decides: not
        // read.
        if overrides && (values.len() > MAX_ATTRIBUTE_TEXT || direction == Some(Direction::Auto)) {
            self.refuse(self.tag_raw_at, raw_end);
        }
        let text = decode_references(&values);
        let rtl = direction.and_then(Direction::is_rtl);
        self.shown_apart(&text, rtl, overrides, self.tag_raw_at, raw_end, out);
        // A line break in a value: an input's value and placeholder drop it, an image's `alt`
        // folds it into a space — one paragraph either way.
        if text.contains(['\n', '\r']) {
            for with in ["", " "] {
                let joined = text.replace("\r\n", with).replace(['\n', '\r'], with);
                self.shown_apart(&joined, rtl, overrides, self.tag_raw_at, raw_end, out);
            }
        }
        // (The buffer's room is kept for the next tag.)
        self.attribute_values = values;
        self.attribute_values.clear();
    }
}

/// What an attribute value or a link destination being read says so far, to find an SVG image
/// in a `data:` URL anywhere in it (an `<img>`'s `src` or `srcset`, a `poster`, an SVG
/// `<image>`'s `href`, a style's `url(…)`, a style sheet's, `![x](data:…)`): SVG is text a
/// browser draws, which the view does not read — refused. Read as the browser reads it: HTML
/// references decoded (one at a time, as each ends), then CSS escapes (`\2b `, `\+`, which
/// cover Markdown's backslash escapes too), white space dropped, any case.
#[derive(Debug, Default, Clone)]
pub(in crate::scan::normal) struct SvgDataUrl {
    /// The last characters read, decoded, in lower case.
    read: String,
    /// A reference being read (`&…`).
    reference: String,
    /// A CSS escape being read: the hex digits after its `\`.
    escape: Option<String>,
}

impl SvgDataUrl {
    const NAME: &'static str = "data:image/svg+xml";
    /// The longest reference read: longer (leading zeros) is refused, never skipped.
    const MAX_REFERENCE: usize = 64;

    /// A value, destination or style sheet starts.
    pub(in crate::scan::normal) fn clear(&mut self) {
        self.read.clear();
        self.reference.clear();
        self.escape = None;
    }

    /// The next character; whether what was read names such a URL (or a reference too long
    /// to read).
    pub(in crate::scan::normal) fn read(&mut self, c: char) -> bool {
        if !self.reference.is_empty() {
            let continues = c.is_ascii_alphanumeric() || (c == '#' && self.reference == "&");
            if continues {
                self.reference.push(c);
                return self.reference.len() > Self::MAX_REFERENCE;
            }
            if c == ';' {
                self.reference.push(c);
            }
            let decoded = decode_references(&std::mem::take(&mut self.reference));
            let mut found = false;
            for d in decoded.chars() {
                found |= self.unescaped(d);
            }
            if found {
                return true;
            }
            if c == ';' {
                return false;
            }
        }
        if c == '&' {
            self.reference.push(c);
            return false;
        }
        self.unescaped(c)
    }

    /// A character after references: CSS escapes read.
    fn unescaped(&mut self, c: char) -> bool {
        if let Some(hex) = self.escape.as_mut() {
            if c.is_ascii_hexdigit() && hex.len() < 6 {
                hex.push(c);
                return false;
            }
            let hex = self.escape.take().unwrap_or_default();
            if hex.is_empty() {
                // `\` and any other character: that character.
                return self.push(c);
            }
            let escaped = u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{FFFD}');
            let found = self.push(escaped);
            // (One white space after the digits is the escape's.)
            if found || c.is_ascii_whitespace() {
                return found;
            }
        }
        if c == '\\' {
            self.escape = Some(String::new());
            return false;
        }
        self.push(c)
    }

    fn push(&mut self, c: char) -> bool {
        if c.is_ascii_whitespace() {
            return false;
        }
        if self.read.len() >= 2 * Self::NAME.len() {
            let keep = self.read.len() - Self::NAME.len();
            let keep = (keep..=self.read.len())
                .find(|&i| self.read.is_char_boundary(i))
                .unwrap_or(self.read.len());
            self.read.drain(..keep);
        }
        self.read.push(c.to_ascii_lowercase());
        self.read.ends_with(Self::NAME)
    }
}
