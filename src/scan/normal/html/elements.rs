//! Elements whose rendering moves text rather than hiding it, read with the inline elements
//! open around the text (a small stack, as a browser's parser keeps it: an end tag closes its
//! element and every element opened inside it; `<rt>`, `<rp>` and `<rtc>` close the
//! annotations before them; a blank line — Markdown's paragraph end — closes them all):
//!
//! - a **ruby annotation** (`<rt>`, `<rtc>` inside a `<ruby>`) is shown above its base text,
//!   not between its letters (`forbid<ruby>den<rt>zz</rt></ruby>` reads `forbidden`), and a
//!   `<rp>`'s text is not shown at all: their text is hidden, an aside. An `<rt>` outside a
//!   ruby, or in one with no base text before it, is shown in line, as a browser shows it;
//!   foreign content a browser does not draw
//!   (an `<svg>`'s or `<math>`'s text outside their text and token elements) is hidden too;
//! - **`<bdo dir="rtl">`** (and `ltr`; the value's references decoded) shows its text in the
//!   forced direction, as the bidi override U+202E (U+202D) in an isolate (U+2067, U+2066)
//!   does: the bidi stage (`bidi.rs`) reads it as that isolated override, up to where the
//!   element closes (its end tag, or an end tag that closes it), so the text shown reversed is
//!   an aside in the order it is shown. So does any element whose style overrides the
//!   direction (`unicode-bidi: bidi-override` from its `style`, a rule, or in foreign content
//!   a presentation attribute), and a `<bdo>` without a direction of its own: the direction
//!   is the element's own (its style, a rule, a presentation attribute, its `dir`) or else the
//!   one of the elements around it (left to right when none says). A direction `auto` (the
//!   first strong character's, which may come later) with an override is refused.

use super::super::join::Unbroken;
use super::super::markup::decode_references;
use super::super::{Normalizer, Unit};
use super::attributes::{Direction, MAX_STYLE};
use super::css;
use super::syntax::{
    not_shown, BLOCK_TAGS, HIDDEN_BY_KIND, RAW_TEXT, SEPARATED, SHOWN_IN_DOUBT, VOID,
};
use super::tree::{
    self, closed_by, closed_by_end_tag, Holds, Space, BREAKOUT, CLOSES_P, FORMATTING, IN_LABEL,
    SPECIAL, TABLE_PARTS,
};
use super::{Literal, Markup, HIDDEN_OVERLAP, MAX_HIDDEN};

/// Tag names kept to decide what a tag opens or closes (longer ones are none of these).
const MAX_NAME: usize = 16;

/// Inline elements kept open; past it, the outermost is forgotten (its end tag closes
/// nothing).
const MAX_OPEN: usize = 64;

/// An element open around the text: its name (empty when longer than [`MAX_NAME`]), and
/// whether it opened a bidi override (`<bdo dir>`).
#[derive(Debug, Clone)]
pub(in crate::scan::normal) struct OpenElement {
    name: String,
    overrides: bool,
    /// The direction it sets for its text (none: the one around it).
    direction: Option<Direction>,
    /// Its style sets how it is displayed: the break its end tag makes may not be there.
    display: bool,
    /// A `<ruby>` whose base text was shown: its annotations are shown above it. (Without a
    /// base, a browser shows an annotation in line.)
    based: bool,
    /// Its style may hide its text (`css.rs`): the view shows it, a browser may not.
    css_hidden: bool,
    /// Which such element it is, for the readings that hide it (`css/readings.rs`; 0: none).
    serial: u32,
    /// A browser may draw it apart from the words around it (`separated`).
    separated: bool,
    /// It is its parent's first element (MathML's `<semantics>` and `<maction>` draw only
    /// theirs), and it has had elements of its own.
    first: bool,
    children: bool,
    /// Its namespace, and what it lets through as HTML, as the tree builder decided at its
    /// start tag (`tree.rs`).
    space: Space,
    holds: Holds,
}

impl AsRef<str> for OpenElement {
    fn as_ref(&self) -> &str {
        &self.name
    }
}

impl tree::Node for OpenElement {
    fn name(&self) -> &str {
        &self.name
    }
    fn space(&self) -> Space {
        self.space
    }
}

impl OpenElement {
    /// Whether it is foreign (SVG's or MathML's).
    pub(in crate::scan::normal) fn foreign(&self) -> bool {
        self.space != Space::Html
    }

    pub(in crate::scan::normal) fn serial(&self) -> u32 {
        self.serial
    }

    /// Whether it is the element `name`.
    pub(in crate::scan::normal) fn is(&self, name: &str) -> bool {
        self.name == name
    }
}

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
        self.encoding_value = None;
        self.css_value = 0;
        self.tag_may_hide = false;
        self.style_value.clear();
        self.presentation_value.clear();
        self.class_value.clear();
        self.id_value.clear();
        self.attribute_values.clear();
        self.tag_srcdoc = false;
    }

    /// What the start tag `name` that ended does to its text by CSS: whether it may hide it,
    /// and the direction it forces (`html/css.rs`).
    fn tag_style(&mut self, name: &str) -> css::Style {
        let value = std::mem::take(&mut self.style_value);
        let (class, id) = (
            std::mem::take(&mut self.class_value),
            std::mem::take(&mut self.id_value),
        );
        if name == "link" {
            self.linked_sheet();
        }
        let mut style = if value.is_empty() {
            css::Style::default()
        } else if value.len() > MAX_STYLE {
            css::Style {
                hides: true,
                ..css::Style::default()
            }
        } else {
            css::declarations(&decode_references(&value))
        };
        // SVG's presentation attributes (in foreign content, unless the tag breaks out of
        // it); a closed `<details>` hides what follows its summary.
        let foreign = self.start_tag_space(name) != Space::Html;
        // Elements whose content a browser may or may not show are in doubt.
        style.hides |= (std::mem::take(&mut self.tag_may_hide) && foreign)
            || self.hidden_attribute
            || name == "details"
            || SHOWN_IN_DOUBT.contains(&name);
        // SVG text whose glyphs are placed one by one: not read in the order written.
        if foreign && self.glyphs_placed(name) {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
        let presentation = std::mem::take(&mut self.presentation_value);
        let (class, id) = (decode_references(&class), decode_references(&id));
        let sheet = self.sheet.get_or_insert_default();
        let ruled = sheet.style_of(name, &class, &id);
        // The cascade: the `style` attribute, then the rules, then presentation attributes.
        style.hides |= ruled.hides;
        style.display |= ruled.display;
        style.shows |= ruled.shows;
        style.draws_box |= ruled.draws_box;
        style.bidi_override |= ruled.bidi_override;
        style.direction = style.direction.or(ruled.direction);
        if foreign && !presentation.is_empty() {
            let presented = css::declarations(&decode_references(&presentation));
            style.bidi_override |= presented.bidi_override;
            style.direction = style.direction.or(presented.direction);
        }
        // (A later rule may restyle a control: an `<input>` is seen too.)
        if !VOID.contains(&name) || name == "input" {
            sheet.seen(name, &class, &id);
        }
        // Refused: text a style generates, or an override it makes through a variable; an
        // element the view hides by its kind (a raw-text element, a ruby's annotation, one
        // with the `hidden` attribute) that a style may show; a control whose box a style draws
        // (its value or text is read as a paragraph of its own, which it is only inside the
        // box a browser draws for it: without a border and a background of its own it reads
        // joined to the words beside it).
        // (A `<semantics>`'s or an `<maction>`'s child after the first is hidden by MathML's
        // own style, which an author's style overrides.)
        let later_child = self
            .open_elements
            .last()
            .is_some_and(|p| (p.is("semantics") || p.is("maction")) && p.children);
        let hidden_by_kind = not_shown(name)
            || matches!(name, "rp" | "rt" | "rtc")
            || self.hidden_attribute
            || later_child;
        let control = css::is_control(name);
        if style.unread || (style.shows && hidden_by_kind) || (control && style.draws_box) {
            self.refuse(self.tag_raw_at, self.tag_raw_at + 1);
        }
        style
    }

    /// A `<style>` element's text, character by character: held back from the `<style` tag
    /// on, up to [`css::MAX_SHEET`] (a longer one is refused).
    pub(super) fn style_sheet_char(&mut self, c: char, raw_end: u64) {
        let start = *self.sheet_raw.get_or_insert(self.tag_raw_at);
        if self.sheet_text.len() < css::MAX_SHEET {
            self.sheet_text.push(c);
        } else {
            self.refuse(start, raw_end);
        }
    }

    /// A `<style>` element ended: its rules apply to the elements after it — and to those
    /// before it, whose text was read as shown (and may have been released): a rule that may
    /// hide one of them is refused, from the style sheet's start (`raw`) on.
    pub(super) fn style_sheet_ended(&mut self, raw_end: u64) {
        let raw = self.sheet_raw.take().unwrap_or(self.tag_raw_at);
        let text = std::mem::take(&mut self.sheet_text);
        let sheet = self.sheet.get_or_insert_default();
        // An override of the root or the body orders the whole text: not read.
        let late = sheet.add_late(&text) || sheet.root_style().bidi_override;
        if late {
            self.refuse(raw, raw_end);
        }
    }

    /// A tag ended: the elements it opens or closes, the overrides with them.
    pub(super) fn element_ended(&mut self, raw_end: u64, out: &mut String) {
        let name = std::mem::take(&mut self.tag_element);
        let dir = decode_references(&std::mem::take(&mut self.dir_value));
        // A start tag of a table's parts outside a table is ignored by a browser's parser (no
        // element, no break): `forbid<td>den` shows `forbidden`.
        // So is a `<form>` while one is open (HTML's form element pointer) or in a table
        // outside its cells (an empty element there): no break.
        // (Looked up only for those tags: every other tag costs no walk of the open elements.)
        let ignored_start = !self.tag_closing
            && if TABLE_PARTS.contains(&name.as_str()) {
                self.tables.is_empty() && !self.open_elements.iter().any(|e| e.name == "table")
            } else if name == "form" {
                let form_open = self
                    .open_elements
                    .iter()
                    .chain(self.html_open.iter())
                    .any(|e| e.name == "form");
                let outside_cell = self
                    .open_elements
                    .iter()
                    .rev()
                    .find(|e| matches!(e.name.as_str(), "table" | "td" | "th" | "caption"))
                    .is_some_and(|e| e.name == "table");
                form_open || outside_cell
            } else {
                false
            };
        if ignored_start {
            self.attribute_values.clear();
            self.ignored_tag = true;
            return;
        }
        // A tag inside an option that its label does not read as the view does.
        let label_part = IN_LABEL.contains(&name.as_str())
            || matches!(name.as_str(), "option" | "optgroup" | "select");
        if !label_part && self.open_elements.iter().any(|e| e.name == "option") {
            self.refuse(self.tag_raw_at, raw_end);
        }
        let style = if self.tag_closing {
            css::Style::default()
        } else {
            self.tag_style(&name)
        };
        // (One whose style may hide it has readings of its own: with it, without it.)
        let separated = self.separated(&name, style.display);
        if separated && !style.hides {
            self.boundary_reading(self.tag_raw_at);
        }
        // A style that sets how a block is displayed (`display: inline`): the break its tag
        // makes may not be there (`tag.rs` reads it both ways). (One that may hide it has its
        // own reading, without its breaks.) So with one that sets how an element around it
        // lays out its children (`display: flex`, `grid`: the blocks inside stand side by
        // side).
        // (A style for the root or the body lays out the text's own blocks; a ruby's base lays
        // out the blocks inside it in line.)
        let block = BLOCK_TAGS.contains(&name.as_str());
        let root = block && self.sheet.as_ref().is_some_and(|s| s.root_style().display);
        let laid_out = |around: &[OpenElement]| block && (root || around.iter().any(|e| e.display));
        // (A closed `<details>` hides what follows its summary, an open one is a block.)
        let in_ruby = |around: &[OpenElement]| {
            (block || name == "details") && around.iter().any(|e| e.name == "ruby")
        };
        // The element an end tag closes; one open past a scope boundary is not (the tag is
        // ignored: no break).
        let open_named = self.open_elements.iter().any(|e| e.name == name);
        let closes = if self.tag_closing {
            closed_by_end_tag(&self.open_elements, &name)
        } else {
            None
        };
        let (shown, own, side) = if self.tag_closing {
            match closes {
                Some(i) => {
                    let (e, around) = (&self.open_elements[i], &self.open_elements[..i]);
                    (
                        !e.css_hidden,
                        e.display || in_ruby(around),
                        laid_out(around),
                    )
                }
                None => (
                    true,
                    in_ruby(&self.open_elements),
                    laid_out(&self.open_elements),
                ),
            }
        } else {
            (
                !style.hides || VOID.contains(&name.as_str()),
                (style.display && block) || in_ruby(&self.open_elements),
                laid_out(&self.open_elements),
            )
        };
        // (An open `<details>` in a ruby is shown in line: its break may not be there either.)
        let details_in_ruby = name == "details" && in_ruby(&self.open_elements);
        self.break_in_doubt = match (shown || details_in_ruby, side, own) {
            (false, _, _) => None,
            (true, true, _) => Some(Unbroken::SideBySide),
            (true, false, true) => Some(Unbroken::Inline),
            (true, false, false) => None,
        };
        // A table's cells are set side by side, touching when the table sets no spacing or
        // padding (`cellspacing=0 cellpadding=0`, `border-spacing: 0`), and a table may float
        // beside the text around it (`align=left`): the words across a cell's or a table's tag
        // may join.
        if shown && matches!(name.as_str(), "td" | "th" | "table") {
            self.break_in_doubt = Some(Unbroken::SideBySide);
        }
        self.table_tag(&name, self.tag_closing, out);
        let breaks_out = if self.tag_closing {
            matches!(name.as_str(), "p" | "br")
        } else {
            BREAKOUT.contains(&name.as_str())
        };
        if breaks_out && tree::breaks_out_of(self.current_node()) {
            self.break_out_of_foreign_content();
        }
        // A start tag closes what the parser's implied end tags (and the adoption agency)
        // close: `forbid<a style=display:none>zz<a>den` shows `forbidden`.
        if !self.tag_closing {
            let closes = closed_by(&name);
            let closes_p = CLOSES_P.contains(&name.as_str());
            if closes_p {
                self.markdown_paragraph_closed();
            }
            let closed =
                |e: &OpenElement| closes.contains(&e.name.as_str()) || (closes_p && e.name == "p");
            if closes_p || !closes.is_empty() {
                if let Some(i) = self.open_elements.iter().rposition(closed) {
                    // (An `<a>` or `<nobr>` it closes itself a browser does not re-open.)
                    self.formatting_outlives(i + 1, raw_end);
                    self.close_elements(i);
                }
                if let Some(i) = self.html_open.iter().rposition(closed) {
                    self.html_open.truncate(i);
                }
                // What those hid ends here, before the new element (in doubt too, it may
                // hide what follows: its own reading).
                self.browser_sees_again();
            }
        }
        // The element's own direction (its style, else its `dir`).
        let own = Direction::of_style(style.direction).or_else(|| {
            match dir.trim().to_ascii_lowercase().as_str() {
                "rtl" => Some(Direction::Rtl),
                "ltr" => Some(Direction::Ltr),
                "auto" => Some(Direction::Auto),
                _ => None,
            }
        });
        // What a browser shows apart from the text, in its own order: the start tag's values
        // (an input's), a `<textarea>`'s text (when it ends, `html.rs`).
        self.raw_text_order = None;
        if !self.tag_closing {
            self.embedded_document(&name);
            let overrides = style.bidi_override;
            self.attributes_shown(own, overrides, raw_end, out);
            if RAW_TEXT.contains(&name.as_str()) {
                let direction = own.or_else(|| self.inherited_direction());
                self.raw_text_order = Some((direction.and_then(Direction::is_rtl), overrides));
            }
        }
        // An end tag that closes no element a browser ignores (`</p>` and `</br>` aside,
        // which it reads as `<p></p>` and `<br>`): no break — or one in doubt, in line, when
        // it may close an element the view forgot (which it closes then).
        let out_of_scope = open_named && closes.is_none() && !matches!(name.as_str(), "p" | "br");
        if self.tag_closing && out_of_scope {
            self.ignored_tag = true;
        } else if self.tag_closing && !matches!(name.as_str(), "p" | "br") && !open_named {
            let (names, past_bound) = &mut self.forgotten;
            let known = names
                .iter()
                .rposition(|n| *n == name)
                .map(|i| names.remove(i));
            if known.is_some() || *past_bound {
                self.break_in_doubt = Some(Unbroken::Inline);
            } else {
                self.ignored_tag = true;
            }
        }
        if self.tag_closing {
            self.join_end_tag(&name);
            if let Some(i) = closes {
                self.formatting_outlives(i + 1, raw_end);
                self.block_moved_out(&name, i, raw_end);
                self.close_elements(i);
            }
            if !out_of_scope {
                if let Some(i) = self.html_open.iter().rposition(|e| e.name == name) {
                    self.html_open.truncate(i);
                }
            }
        } else if (!VOID.contains(&name.as_str())
            && !matches!(
                name.as_str(),
                "html" | "body" | "head" | "frameset" | "frame"
            ))
            // (In foreign content every name is an element with content, `<input>` too.)
            || (!self.tag_closing && self.start_tag_space(&name) != Space::Html)
        {
            // (`<x/>` opens `x` all the same: HTML ignores the slash. The document's own
            // elements are never opened in its body: their start tags add attributes or nothing.)
            // An annotation starts: the annotations before it end (the parser's implied end
            // tags).
            if matches!(name.as_str(), "rt" | "rp" | "rtc") {
                let closes = |e: &OpenElement| {
                    matches!(e.name.as_str(), "rt" | "rp" | "rb")
                        || (name == "rtc" && e.name == "rtc")
                };
                let keep = self
                    .open_elements
                    .iter()
                    .rposition(|e| !closes(e))
                    .map_or(0, |i| i + 1);
                self.close_elements(keep);
            }
            // `<bdo>` isolates its text and overrides its direction (CSS `unicode-bidi:
            // isolate-override`): an isolate and an override, so neutrals around it resolve
            // as around one character. (CSS's `unicode-bidi: bidi-override` does the same.)
            let over = if name == "bdo" || style.bidi_override {
                match own.or_else(|| self.inherited_direction()) {
                    Some(Direction::Rtl) => Some(['\u{2067}', '\u{202E}']),
                    Some(Direction::Ltr) | None => Some(['\u{2066}', '\u{202D}']),
                    Some(Direction::Auto) => {
                        // Which way it forces the text depends on a character yet to come:
                        // not read.
                        self.refuse(self.tag_raw_at, raw_end);
                        None
                    }
                }
            } else {
                None
            };
            // Past the bound the outermost element is forgotten (its end tag then closes
            // nothing), never the one opening now: an override is always read.
            if self.open_elements.len() >= MAX_OPEN {
                let e = self.open_elements.remove(0);
                // (Foreign content decides what is drawn and parsed: never forgotten.)
                if e.foreign() {
                    self.refuse(self.tag_raw_at, raw_end);
                }
                self.forget(e.name);
            }
            for c in over.into_iter().flatten() {
                self.bidi_open_spelled(c, raw_end);
            }
            // Readings where a browser hides some of the elements a style may hide near it
            // and not others (`css/readings.rs`).
            let serial = if style.hides {
                self.style_element_opens(self.tag_raw_at, out)
            } else {
                0
            };
            // A style that may hide the text: the browser's reading, the text before joined
            // to what follows the element's end, is recorded (`join.rs`).
            if style.hides && !self.browser_waiting() {
                // (Those open around it are shown in this reading: a construct inside them
                // took it elsewhere, `css/readings.rs`.)
                self.browser_css_depth = self.open_elements.iter().filter(|e| e.css_hidden).count();
                self.open_html_join(self.tag_raw_at);
            }
            let first = self.child_element();
            // In foreign content `<x/>` is closed at once (HTML ignores the slash).
            let space = self.start_tag_space(&name);
            let holds = tree::holds(space, &name, self.html_encoding());
            let closed = std::mem::take(&mut self.self_closing) && space != Space::Html;
            // An HTML `<xmp>` or `<plaintext>` shows what follows as written (`literal.rs`).
            if space == Space::Html && self.markup == Markup::Text {
                match name.as_str() {
                    "xmp" => self.markup = Markup::Literal(Literal::Xmp),
                    "plaintext" => self.markup = Markup::Literal(Literal::Plaintext),
                    _ => {}
                }
            }
            if !closed {
                self.open_elements.push(OpenElement {
                    name,
                    overrides: over.is_some(),
                    direction: own,
                    display: style.display,
                    based: false,
                    css_hidden: style.hides,
                    serial,
                    separated,
                    first,
                    children: false,
                    space,
                    holds,
                });
            }
        } else if !self.tag_closing {
            self.child_element();
        }
        self.browser_sees_again();
        self.annotation_hidden = hides(&self.open_elements);
        if !self.annotation_hidden {
            // (What the block showed to Markdown runs on into what the view shows now.)
            self.markdown_paragraph_ends(raw_end, false);
            self.element_hidden_ends(out);
        }
    }

    /// A blank line closes the open elements, which hide text (Markdown's reading); a browser
    /// reading HTML keeps them open: its reading — the text before, joined to what follows
    /// their end — is recorded (`join.rs`).
    fn hidden_past_blank_line(&mut self, raw: u64) {
        // Elements a style may hide and elements that hide their text, open together: the
        // reading with the first shown is recorded apart (`css/readings.rs`).
        if self.open_elements.iter().any(|e| e.css_hidden) && hides(&self.open_elements) {
            self.style_reading_past_blank_line(raw);
        }
        self.html_open = self
            .open_elements
            .iter()
            .filter(|e| !e.overrides)
            .cloned()
            .collect();
        if !self.browser_waiting() {
            self.browser_css_depth = 0;
            self.open_html_join(raw);
        }
    }

    /// An element starts inside the innermost open one: whether it is that one's first.
    fn child_element(&mut self) -> bool {
        self.open_elements
            .last_mut()
            .is_none_or(|parent| !std::mem::replace(&mut parent.children, true))
    }

    /// Elements closed: once none hides text from a browser (by its kind, or by a style that
    /// may hide it), the browser's reading goes on with what the view writes.
    fn browser_sees_again(&mut self) {
        self.style_elements_closed();
        if !self.html_open.is_empty() && !browser_hides(&self.html_open) {
            self.html_open.clear();
        }
        if self.html_open.is_empty()
            && self.open_elements.iter().filter(|e| e.css_hidden).count() <= self.browser_css_depth
            && self.browser_waiting()
        {
            self.close_html_join();
        }
    }

    /// Whether a browser may draw the element the tag `name` starts or ends apart from the
    /// words around it — a quote's marks, a control's or a replaced element's box, a block the
    /// view reads no break for, an element a style (`displayed`: its own, or a style sheet's
    /// rule) makes a block or floats: the words either side of its tag are then read as two
    /// words too (`join.rs`, `boundary_reading`), as a person may see them. (Elements drawn in
    /// line with nothing of their own — `<b>`, `<span>`, an unknown element: one word, as
    /// written.)
    fn separated(&self, name: &str, displayed: bool) -> bool {
        if SEPARATED.contains(&name) {
            return true;
        }
        if self.tag_closing {
            let closes = self.open_elements.iter().rposition(|e| e.name == name);
            return closes.is_some_and(|i| {
                self.open_elements[i].separated && !self.open_elements[i].css_hidden
            });
        }
        displayed
    }

    /// Markdown's block ends (a blank line, a code block's start or end: `blocks.rs`): the
    /// open elements close. A browser reading HTML keeps them open (a blank line is white
    /// space): an override stays open (the bidi run reads both, `bidi.rs`), and text an
    /// element hides from it is read as its aside (`join.rs`).
    pub(super) fn elements_end_for_markdown(&mut self, raw: u64, out: &mut String, blank: bool) {
        // A paragraph's end (`</p>`) closes no `<template>`: what is in it stays hidden.
        if self.open_elements.is_empty()
            || (blank && self.open_elements.iter().any(|e| e.name == "template"))
        {
            return;
        }
        if self.annotation_hidden || self.open_elements.iter().any(|e| e.css_hidden) {
            self.hidden_past_blank_line(raw);
        }
        self.markdown_paragraph_ends(raw, true);
        for e in std::mem::take(&mut self.open_elements) {
            if e.overrides {
                self.open_elements.push(e);
            } else {
                self.forget(e.name);
            }
        }
        self.style_elements_closed();
        self.annotation_hidden = false;
        self.element_hidden_ends(out);
        self.end_hidden(out);
    }

    /// An HTML element's tag inside an `<svg>` or a `<math>` (outside the elements where
    /// their content is HTML): the parser closes the foreign elements and reads it as HTML
    /// (`forbid<svg><b>den` shows `forbidden`).
    fn break_out_of_foreign_content(&mut self) {
        // The parser pops foreign elements until an HTML element or one that lets HTML through
        // (an integration point, `tree.rs`).
        let keep = self
            .open_elements
            .iter()
            .rposition(|e| matches!(e.holds, Holds::Html | Holds::MathText))
            .map_or(0, |i| i + 1);
        self.close_elements(keep);
    }

    /// A Markdown construct a renderer writes as an HTML tag that ends foreign content (an
    /// emphasis's `<em>` or `<strong>`, a code span's `<code>`, an image's `<img>`), at raw
    /// `raw`..`raw_end`: inside an `<svg>` or a `<math>` (where no HTML is held) the rendered
    /// page closes the foreign elements there and a browser reading the text as HTML does not —
    /// two trees the view does not read at once: refused.
    pub(in crate::scan::normal) fn markdown_tag_in_foreign_content(
        &mut self,
        raw: u64,
        raw_end: u64,
    ) {
        if tree::breaks_out_of(self.current_node()) {
            self.refuse(raw, raw_end);
        }
    }

    /// The innermost open element as the tree builder places what starts inside it.
    pub(super) fn current_node(&self) -> Option<(Space, Holds)> {
        self.open_elements.last().map(|e| (e.space, e.holds))
    }

    /// The namespace of the element a start tag `name` opens (a breakout tag's is HTML: it
    /// closes the foreign elements first).
    pub(super) fn start_tag_space(&self, name: &str) -> Space {
        if BREAKOUT.contains(&name) {
            Space::Html
        } else {
            tree::inserted_in(self.current_node(), name)
        }
    }

    /// Whether the tag's `encoding` names an HTML type (a MathML `<annotation-xml>` then holds
    /// HTML).
    fn html_encoding(&self) -> bool {
        self.encoding_value.as_deref().is_some_and(|v| {
            let v = decode_references(v);
            v.eq_ignore_ascii_case("text/html") || v.eq_ignore_ascii_case("application/xhtml+xml")
        })
    }

    /// A character of text open elements hide: kept for their reading across the tags inside
    /// them (the hidden text is cut at each tag; a model reads `forbid<i>den</i>` in a
    /// `<template>` as one word), written every [`MAX_HIDDEN`] characters (the last
    /// [`HIDDEN_OVERLAP`] again) and where they end.
    fn element_hidden_char(&mut self, unit: Unit, out: &mut String) {
        self.element_hidden.0.push(unit);
        if self.element_hidden.0.len() >= MAX_HIDDEN {
            let keep = self.element_hidden.0[MAX_HIDDEN - HIDDEN_OVERLAP..].to_vec();
            self.element_hidden_ends(out);
            self.element_hidden.0 = keep;
        }
    }

    /// The elements stopped hiding text (or a bound was reached): their text, when tags cut
    /// it, is an aside.
    pub(in crate::scan::normal) fn element_hidden_ends(&mut self, out: &mut String) {
        let (units, split) = std::mem::take(&mut self.element_hidden);
        if split {
            self.hidden_aside(&units, out);
        }
    }

    /// An element the view no longer keeps open (a blank line closed it for Markdown, the
    /// bound): a browser may, so an end tag of its name may make a break.
    fn forget(&mut self, name: String) {
        let (names, past_bound) = &mut self.forgotten;
        if names.len() >= MAX_OPEN {
            *past_bound = true;
        } else {
            names.push(name);
        }
    }

    /// The open elements from `from` on close by a tag not their own: a formatting element
    /// among them that does something to its text the view reads (a style that may hide it,
    /// sets its display or its direction, an override; a `hidden` attribute) is re-opened by a
    /// browser around the text that follows, up to its own end tag (`<span><b hidden></span>x`
    /// hides `x`): not read, refused.
    fn formatting_outlives(&mut self, from: usize, raw_end: u64) {
        let styled = |e: &OpenElement| {
            FORMATTING.contains(&e.name.as_str())
                && (e.css_hidden || e.display || e.overrides || e.direction.is_some())
        };
        if self.open_elements[from..].iter().any(styled) {
            self.refuse(self.tag_raw_at, raw_end);
        }
    }

    /// A formatting element's end tag with a special element (a block) open inside it: the
    /// parser's adoption agency moves that block (with what follows, up to its end) out of the
    /// elements between them. One of those that hides its text (by its kind, or by a style
    /// that may) then no longer hides the block's: not read, refused.
    fn block_moved_out(&mut self, name: &str, i: usize, raw_end: u64) {
        if !FORMATTING.contains(&name) {
            return;
        }
        let above = &self.open_elements[i + 1..];
        let Some(block) = above
            .iter()
            .position(|e| SPECIAL.contains(&e.name.as_str()))
        else {
            return;
        };
        if browser_hides(&above[..block]) {
            self.refuse(self.tag_raw_at, raw_end);
        }
    }

    /// Closes the open elements from `from` on (innermost first): their overrides end where
    /// the tag that closes them starts.
    fn close_elements(&mut self, from: usize) {
        let closed: Vec<OpenElement> = self.open_elements.drain(from..).collect();
        for _ in closed.iter().filter(|e| e.overrides) {
            self.bidi_close_spelled(&['\u{202C}', '\u{2069}'], self.tag_raw_at);
        }
    }

    /// The direction the open elements set for the text inside them (the innermost that sets
    /// one; those a blank line closed for Markdown are still open to a browser).
    pub(super) fn inherited_direction(&self) -> Option<Direction> {
        self.open_elements
            .iter()
            .rev()
            .chain(self.html_open.iter().rev())
            .find_map(|e| e.direction)
            // (Else the root's or the body's, from a style sheet's rule.)
            .or_else(|| Direction::of_style(self.sheet.as_ref()?.root_style().direction))
    }

    /// Whether an annotation (`<rt>`, `<rtc>`, `<rp>`) is open.
    fn in_annotation(&self) -> bool {
        self.open_elements
            .iter()
            .any(|e| matches!(e.name.as_str(), "rt" | "rtc" | "rp"))
    }

    /// A character of the text (not markup), as the open elements see it: a blank line closes
    /// them all; inside a hidden annotation it is hidden (true: taken). A `<` (a tag) ends the
    /// hidden text read so far.
    pub(super) fn element_text_char(
        &mut self,
        unit: Unit,
        spelled: bool,
        out: &mut String,
    ) -> bool {
        let c = unit.c;
        if spelled || c != '<' {
            self.text_space_before = c.is_whitespace();
        }
        // A blank line (CommonMark's line endings: LF, CR, CR LF; a line of spaces and tabs)
        // closes them for Markdown. (Other separators — U+2029, U+0085 — end no line: written
        // or spelled, a browser and a Markdown renderer keep the elements open across them.)
        let after_cr = std::mem::replace(&mut self.text_after_cr, !spelled && c == '\r');
        if !spelled && (c == '\r' || (c == '\n' && !after_cr)) {
            if self.line_blank {
                self.elements_end_for_markdown(unit.raw, out, true);
            }
            self.line_blank = true;
        } else if spelled || !matches!(c, ' ' | '\t' | '\n') {
            self.line_blank = false;
        }
        if !self.annotation_hidden {
            // Text shown in a ruby outside its annotations is its base.
            // (A `<` starts a tag: no text.)
            let text = spelled || c != '<';
            if text && !self.open_elements.is_empty() && !c.is_whitespace() && !self.in_annotation()
            {
                if let Some(ruby) = self.open_elements.iter_mut().rfind(|e| e.name == "ruby") {
                    ruby.based = true;
                }
            }
            return false;
        }
        if !spelled && c == '<' {
            self.end_hidden(out);
            self.element_hidden.1 = true;
            return false;
        }
        // Foreign content hides it, up to a Markdown construct a renderer writes as a tag that
        // ends foreign content (an emphasis's delimiter either way, a code span's, an image's).
        if !spelled
            && (matches!(c, '*' | '_' | '`')
                || (c == '[' && self.element_hidden.0.last().is_some_and(|u| u.c == '!')))
        {
            self.markdown_tag_in_foreign_content(unit.raw, unit.raw_end);
        }
        self.element_hidden_char(unit, out);
        self.hide(unit, out);
        true
    }
}

/// Whether text inside `open` (outermost first) is not shown: inside a `<template>`, an `<rp>`, an `<rt>` or
/// `<rtc>` inside a `<ruby>` with base text, or foreign content a browser does not draw as
/// text ([`foreign_drawn`]). (By HTML elements' names: an SVG `<template>` is SVG's.)
pub(in crate::scan::normal) fn hides(open: &[OpenElement]) -> bool {
    let html = |e: &&OpenElement| e.space == Space::Html;
    let at = |name: &str| {
        open.iter()
            .position(|e| e.name == name && e.space == Space::Html)
    };
    let ruby = at("ruby").filter(|&r| open[r].based);
    let annotation = open
        .iter()
        .enumerate()
        .filter(|(_, e)| html(e))
        .any(|(i, e)| {
            e.name == "rp"
                || (matches!(e.name.as_str(), "rt" | "rtc") && ruby.is_some_and(|r| r < i))
        });
    annotation
        || at("template").is_some()
        || open
            .iter()
            .filter(html)
            .any(|e| HIDDEN_BY_KIND.contains(&e.name.as_str()))
        || !foreign_drawn(open)
}

/// Where text inside `open` stands in foreign content, for [`foreign_drawn`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drawn {
    /// HTML (outside foreign content, or where it holds HTML).
    Html,
    /// In an `<svg>` (and its containers), outside its text.
    SvgShape,
    /// In an SVG `<text>` and its text-content children.
    SvgText,
    /// In a `<math>`, outside its token elements.
    MathLayout,
    /// In a MathML token element (`<mi>`, `<mn>`, `<mo>`, `<ms>`, `<mtext>`).
    MathToken,
}

/// SVG's elements that draw their children (a `<defs>`'s, a `<symbol>`'s, a `<mask>`'s… text
/// is drawn where a `<use>` or a `url(#…)` places it: read where it is written; a `<switch>`'s
/// children are read all).
const SVG_CONTAINERS: [&str; 10] = [
    "svg", "g", "a", "switch", "defs", "symbol", "mask", "clippath", "pattern", "marker",
];

/// Whether a browser draws text inside `open` as far as foreign content goes, by each element's
/// namespace (as the tree builder decided it) and name. SVG draws text in a `<text>` and its
/// text-content children (`<tspan>`, `<textPath>`, `<a>`) only, under its containers
/// ([`SVG_CONTAINERS`]) — any other child of a `<text>` (`<q>`, `<g>`, `<desc>`, an unknown
/// name), and anything in a shape, an unknown element, a `<title>`, `<desc>` or `<metadata>`,
/// is in the tree, not drawn; a `<foreignObject>` holds HTML. MathML draws text in its token
/// elements, under any other element (an unknown one, an `<annotation>`, laid out as a row) but
/// an `<mphantom>` (hidden), and of a `<semantics>` or an `<maction>` only the first child;
/// `<mglyph>` and `<malignmark>` in a token draw no text, nor do HTML or SVG elements an
/// `<annotation-xml>` holds. Every element on
/// the way counts: an `<svg>` inside an SVG `<text>` is not drawn, one inside a `<mi>` is.
fn foreign_drawn(open: &[OpenElement]) -> bool {
    let mut at = Drawn::Html;
    for (i, e) in open.iter().enumerate() {
        let name = e.name.as_str();
        at = match (e.space, at, name) {
            // (HTML and SVG inside a MathML layout element — an `<annotation-xml>` holds them —
            // are not drawn.)
            (Space::Html | Space::Svg, Drawn::MathLayout, _) => return false,
            // (HTML elements stand only where HTML is held: a hidden holder has returned.)
            (Space::Html, _, _) => Drawn::Html,
            (Space::Svg, Drawn::SvgText, "tspan" | "textpath" | "a") => Drawn::SvgText,
            (Space::Svg, Drawn::SvgText, _) => return false,
            (Space::Svg, Drawn::SvgShape, "foreignobject") => Drawn::Html,
            (Space::Svg, Drawn::SvgShape, "text") => Drawn::SvgText,
            (Space::Svg, _, name) if SVG_CONTAINERS.contains(&name) => Drawn::SvgShape,
            (Space::Svg, _, _) => return false,
            (Space::Math, Drawn::Html | Drawn::MathToken, "math") => Drawn::MathLayout,
            (Space::Math, Drawn::MathLayout, "mi" | "mn" | "mo" | "ms" | "mtext") => {
                Drawn::MathToken
            }
            (Space::Math, _, "mphantom") => return false,
            (Space::Math, Drawn::MathToken, _) => return false,
            (Space::Math, _, _) => Drawn::MathLayout,
        };
        // Of a `<semantics>` (its annotations) or an `<maction>` only the first child is drawn.
        if at == Drawn::MathLayout
            && matches!(name, "semantics" | "maction")
            && open.get(i + 1).is_some_and(|child| !child.first)
        {
            return false;
        }
    }
    matches!(at, Drawn::Html | Drawn::SvgText | Drawn::MathToken)
}

/// Whether a browser applying styles may not show text inside `open`: as [`hides`], or inside
/// an element whose style may hide it.
fn browser_hides(open: &[OpenElement]) -> bool {
    hides(open) || open.iter().any(|e| e.css_hidden)
}
