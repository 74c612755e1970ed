//! The normalised view of text: what its readers read, for the text checks to match on.
//!
//! Two readers read an answer (or a prompt): a person, through a Markdown or HTML renderer,
//! and a model, through its tokenizer. Either can be handed a banned phrase whose bytes do not
//! hold it: a zero-width space or soft hyphen inside a word, fullwidth or mathematical letters,
//! a Cyrillic `о` among Latin letters, tag characters that spell it invisibly, marks drawn over
//! every letter, a Hangul filler for a space, a bidi override that shows reversed text in
//! order, markup inside a word. The [`Normalizer`] turns the text, piece by piece as it
//! streams, into a view where those spellings are the plain one. In every setting but `none`:
//! - default-ignorable code points (zero-width spaces and joiners, soft hyphen, word joiner,
//!   BOM, bidi controls, a lone variation selector) are removed; tag characters are read as the
//!   ASCII they spell and a run of variation selectors as the bytes it carries (`carrier.rs`:
//!   a model reads both); letters that render as a blank (Hangul fillers, the braille blank)
//!   read as a space (`chars::is_blank`);
//! - a run of whitespace (spaces, tabs, line breaks, every Unicode space and separator) is one
//!   U+0020, so a phrase matches however its words are spaced or wrapped (Markdown renders a
//!   single line break as a space);
//! - full case folding where simple folding falls short (`ß` is `ss`, final `ς` is `σ`);
//! - compatibility decomposition (NFKD), with combining marks in canonical order. A decomposed
//!   form needs no look-ahead (NFKC would wait for a mark that may follow any letter) and
//!   matches exactly what NFKC matching would, since the patterns go through the same view
//!   ([`normalize_pattern`]). Marks drawn over letters read as not there: those of the blocks
//!   every script shares on any letter, and any mark on a Latin or look-alike letter (accents,
//!   strike-through, "Zalgo" stacks); a script's own marks (Arabic vowels, Indic signs) stay;
//! - text under bidi overrides, embeddings and isolates is read as written and, as an aside,
//!   in the order it is shown (`bidi.rs`, UAX #9);
//! - `full` only: in a word that mixes Latin with look-alike letters of another script
//!   (Cyrillic, Greek, Armenian, Cherokee, Coptic), each look-alike letter becomes the Latin
//!   letter it is confusable with (UTS #39 skeletons, from `unicode-security`). Single-script
//!   words are left alone, so Russian or Greek text never turns into Latin words.
//!   Inline Markdown and HTML read as a CommonMark renderer shows them: emphasis, strike-through
//!   and code marks (`*`, `~`, `` ` ``, and `_` at a word's edge) are dropped (`markup.rs`), as
//!   are HTML tags (a tag that breaks a block is a space), comments, link brackets and
//!   destinations, and backslashes before the punctuation they escape (`html.rs`); character
//!   references (`&#102;`, `&nbsp;`) read as the character (`markup.rs`).
//!
//! Where the person and the model read different text (a comment's or an attribute's text, a
//! link's destination, the shown order of a bidi run), the view holds both: the person's text,
//! joined as shown, and the other as an *aside*, a line of its own followed by the view's last
//! characters written again (`aside.rs`), so a phrase matches in either reading.
//!
//! Otherwise case is left to the matchers, as before (literals fold ASCII and simple Unicode
//! case; regexes match as written), so a pattern means the same in the view as in raw text.
//!
//! Every byte of the view is mapped back to the raw text ([`Normalizer::raw_start`],
//! [`Normalizer::raw_end`]), so a match found in the view blocks, holds back and redacts the
//! raw bytes — the obfuscating characters inside a match included. The view is decided char by
//! char with state carried across pieces, so any split of a text gives the view (and the map)
//! of the whole text. What waits for what follows is bounded and decided by the text alone
//! ([`Normalizer::pending_start`]): a run of combining marks, with `full` a word's leading run
//! of look-alike letters, a run of `_` and a character reference (64 characters, the longest
//! reference), a variation selector (one character), a bidi run (until it ends, at most
//! [`bidi::MAX_BIDI`] characters: past that with a control open the span is refused,
//! [`Normalizer::take_refusal`]), and with `full` a `<` construct, a backslash, the hidden
//! text of a comment, tag or link (`html.rs`), and the other reader's reading around an
//! autolink, an image or a tag CommonMark does not read (`join.rs`: from its context up to
//! [`join::TRAIL`] bytes of view after it), so a match in an aside blocks before any of it
//! is released.

mod aside;
mod bidi;
mod carrier;
mod chars;
mod html;
mod join;
mod line_marks;
mod map;
mod markup;
mod pattern;
mod segment;

pub use pattern::{normalize_hir, normalize_pattern};

use chars::{
    class, full_fold, is_ascii_space, is_blank, is_ignorable, is_markup, is_shared_mark,
    latin_twin, plain_space, Class,
};
use html::Markup;
use std::borrow::Cow;
use std::collections::VecDeque;
use unicode_normalization::char::{canonical_combining_class, decompose_compatible};

/// How a validator's text is matched (`normalize:` in a pack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Normalize {
    /// The text as it came (JSON escapes resolved where the text is JSON).
    None,
    /// Invisible characters removed, spaces folded, compatibility forms decomposed.
    Nfkc,
    /// `nfkc`, and look-alike letters of mixed-script words read as Latin.
    #[default]
    Full,
}

impl Normalize {
    pub const NAMES: &'static str = "none, nfkc, full";

    pub fn parse(s: &str) -> Option<Normalize> {
        match s {
            "none" => Some(Normalize::None),
            "nfkc" => Some(Normalize::Nfkc),
            "full" => Some(Normalize::Full),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Normalize::None => "none",
            Normalize::Nfkc => "nfkc",
            Normalize::Full => "full",
        }
    }
}

/// A run of the view and the raw text it came from. Runs cover the view without gaps; a run
/// ends where the next begins (or at the end of the view).
#[derive(Debug, Clone, Copy)]
struct Run {
    /// View position of the run's first byte.
    out: u64,
    /// Raw span the run came from.
    raw: u64,
    raw_end: u64,
    /// The run is the raw text itself, byte for byte: positions inside map one to one.
    /// Otherwise any position inside maps to the span's ends.
    exact: bool,
}

/// A character of the view waiting for what follows, with the raw span it came from.
#[derive(Debug, Clone, Copy)]
struct Unit {
    c: char,
    raw: u64,
    raw_end: u64,
    exact: bool,
}

/// Held runs longer than this are released as they are (so memory and hold-back stay bounded
/// whatever the peer sends; the cut depends only on the text, so every split agrees).
const MAX_HELD: usize = 64;

/// The incremental normaliser of one channel (see the module docs).
#[derive(Debug, Clone)]
pub struct Normalizer {
    mode: Normalize,
    raw_len: u64,
    out_len: u64,
    runs: VecDeque<Run>,
    /// Combining marks after the last starter, in the order they came.
    marks: Vec<(Unit, u8)>,
    /// `full`: the current word's leading look-alike letters (and what followed them), held
    /// until a Latin letter (read as Latin) or the word's end (as they are).
    held: Vec<Unit>,
    /// `full`: the current word has a Latin letter.
    word_latin: bool,
    /// The view's last character is the space of a whitespace run (the run's rest is dropped).
    after_space: bool,
    /// The last starter (the character the pending marks sit on).
    base: Option<char>,
    /// `full`: a run of `_` waiting for the character after it (Markdown emphasis at a word's
    /// edge is dropped, inside a word it is text; `markup.rs`).
    underscores: Vec<Unit>,
    /// `full`: the character before the waiting `_` run is alphanumeric.
    underscores_after_word: bool,
    /// `full`: the last character of the text was a CR (a CR LF is one line ending).
    text_after_cr: bool,
    /// `full`: the stretch of raw text marks' and boundaries' readings are counted in (its
    /// first such reading's raw position) and how many it opened (`join.rs`).
    dense_readings: (u64, u32),
    /// `full`: the character before the waiting `_` run is punctuation as CommonMark reads it.
    underscores_after_punctuation: bool,
    /// The last character the Markdown stage read was spelled (a reference, an escape).
    after_spelled: bool,
    /// A Markdown mark dropped while a `_` run waited, at this raw position (`markup.rs`).
    mark_after_underscores: Option<u64>,
    /// `full`: a character reference being read, from its `&` (`markup.rs`).
    reference: Vec<Unit>,
    /// A piece of a pattern (a regex's literal), whose `_` is text: what surrounds it in the
    /// text is not known here, and inside a word (`sk_live_…`) the view keeps it.
    fragment: bool,
    /// The view's last bytes (what an aside writes again; `aside.rs`).
    recent: String,
    /// Asides waiting to be written together, the view's length when the first came, and
    /// their bytes (`aside.rs`).
    asides: Vec<aside::Aside>,
    asides_from: u64,
    asides_bytes: usize,
    /// Variation selectors of the current run, as the bytes they carry (`carrier.rs`).
    selectors: Vec<Unit>,
    selector_run: u32,
    /// What the current carrier run spelled, written as an aside when it ends (`carrier.rs`).
    carried: Vec<Unit>,
    /// The raw characters since a bidi control opened a run (`bidi.rs`), the controls open
    /// (true: an isolate), characters since the last one closed, and the view's text before
    /// the run (with the raw position of its start).
    bidi: Vec<Unit>,
    bidi_open: Vec<bool>,
    bidi_trail: usize,
    bidi_context: String,
    bidi_context_raw: u64,
    /// The run started inside a `<ruby>` (its `<rt>` text is not shown: `bidi.rs`).
    bidi_in_ruby: bool,
    /// The run went on through a blank line with a control open (`bidi.rs`).
    bidi_past_blank_line: bool,
    /// A raw span the view could not read within its bounds (see [`Normalizer::take_refusal`]).
    refused: Option<(u64, u64)>,
    /// `full`: the Markdown and HTML construct being read (`html.rs`), its `<…` so far, its
    /// hidden text so far, a backslash waiting for the character it escapes, the `[` open, and
    /// whether the last character was a `]` that closed one (a `(` then opens a destination).
    markup: Markup,
    /// `full`: the start tag being read opens a raw-text element (`html.rs`, [`RAW_TEXT`]).
    raw_text: Option<u8>,
    tag: Vec<Unit>,
    hidden: Vec<Unit>,
    escape: Option<Unit>,
    brackets: u32,
    after_bracket: bool,
    /// `full`: the browser's and the Markdown renderer's readings around the constructs they
    /// read apart, being recorded (`join.rs`).
    joins: [Option<Box<join::Join>>; join::READINGS],
    /// The browser's reading waiting for elements that hide what comes, put aside while an
    /// image's reading (the rendered Markdown's) is recorded (`join.rs`).
    parked_browser: Option<Box<join::Join>>,
    /// Readings a construct went on from, going on with that construct shown (`join.rs`).
    trailing_joins: Vec<join::Join>,
    /// `full`: readings where a browser hides some of the elements a style may hide and shows
    /// others (`html/css/readings.rs`), and the last such element's serial.
    style_readings: Vec<html::css::readings::StyleReading>,
    element_serial: u32,
    /// Elements a style may hide open around the one the browser's waiting reading hides
    /// (shown in it).
    browser_css_depth: usize,
    /// `full`: a white space run waiting for the character after it, and whether the last
    /// character was a U+200B (`segment.rs`).
    after_break: bool,
    after_zwsp: bool,
    /// `full`: the tag being read is a `<wbr>` (`segment.rs`); its text as written (`join.rs`).
    wbr: bool,
    tag_raw: String,
    tag_raw_at: u64,
    /// Where the end tag that may end a raw-text element starts (its `<`).
    raw_text_end_at: u64,
    /// `full`: the start tag whose attributes are read: its element's name, the attribute
    /// name being read (its first bytes), and whether a `hidden` attribute was read
    /// (`html.rs`).
    hidden_element: String,
    attribute_name: String,
    hidden_attribute: bool,
    /// `full`: the start tag read so far has a presentation attribute (`html/elements.rs`).
    tag_may_hide: bool,
    /// `full`: the tag that ended makes a break a style may remove (`html/elements.rs`).
    break_in_doubt: Option<join::Unbroken>,
    /// `full`: the tag that ended is one a browser ignores (no break: an end tag that closes
    /// nothing, a table's part outside a table); the elements a blank line or the bound made
    /// the view forget (their names, and whether more were: an end tag of one may close it);
    /// whether the last text character was white space (`html/elements.rs`).
    ignored_tag: bool,
    forgotten: (Vec<String>, bool),
    text_space_before: bool,
    /// `full`: the tag being read (its name when short, whether it is an end tag, its `dir`
    /// value), the inline elements open around the text, whether the text
    /// is a hidden annotation, and whether the line is blank so far (`html/elements.rs`).
    tag_element: String,
    tag_closing: bool,
    dir_attribute: bool,
    /// The tag being read ends a start tag with `/>` if `>` comes next (a `/` not in an
    /// unquoted value): in foreign content the element is closed at once.
    self_closing: bool,
    dir_value: String,
    /// The tag's first `encoding` value (kept up to a bound) while its value is read.
    encoding_value: Option<String>,
    encoding_attribute: bool,
    /// The start tag's attribute values, each a paragraph (`html/attributes.rs`), and the
    /// order a raw-text element's text is shown in (its direction, its override).
    attribute_values: String,
    raw_text_order: Option<(Option<bool>, bool)>,
    /// The start tag has a `srcdoc` attribute (`html/attributes.rs`).
    tag_srcdoc: bool,
    /// The last characters of an attribute value or a link destination being read
    /// (`html/attributes.rs`).
    svg_data_url: html::SvgDataUrl,
    /// The rest of a line after `]:` (a Markdown link reference definition's URL), read as
    /// `svg_data_url` reads a tag's values (a reader of its own: a tag on the line has its).
    definition_url: Option<html::SvgDataUrl>,
    /// The tag's `style`, `class` and `id` values (`html/css.rs`), which one a value being
    /// read is (`css_value`: 0 none, else `style`, `class`, `id`), and the style sheets read so far.
    css_value: u8,
    style_value: String,
    /// In foreign content, the `direction` and `unicode-bidi` presentation attributes read, as
    /// declarations, and the glyph positions (`x`, `dx`, …: `html/attributes.rs`).
    presentation_value: String,
    class_value: String,
    id_value: String,
    sheet: Option<Box<html::StyleSheet>>,
    sheet_text: String,
    /// Where the style sheet being read starts (its `<style` tag).
    sheet_raw: Option<u64>,
    /// Text open elements hid, across the tags inside them, and whether a tag cut it
    /// (`html/elements.rs`).
    element_hidden: (Vec<Unit>, bool),
    /// Where a block closed Markdown's paragraph, and the elements hiding text with it, for
    /// Markdown's reading (`html/elements.rs`).
    /// (With the view's last characters before it, and where they start.)
    markdown_shown_from: Option<(u64, String, u64)>,
    /// Markdown's block marks at a line's start (`line_marks.rs`).
    line_marks: line_marks::LineMarks,
    /// A script's last characters and state (`html.rs`).
    script_tail: String,
    script_state: u8,
    open_elements: Vec<html::OpenElement>,
    /// Elements a blank line closed for Markdown that still hide text from a browser reading
    /// HTML (`html/elements.rs`).
    html_open: Vec<html::OpenElement>,
    /// Tables open (`html/table.rs`): the text a browser moves before them.
    tables: Vec<html::Table>,
    annotation_hidden: bool,
    line_blank: bool,
    /// The line's start, for Markdown's code blocks (`html/blocks.rs`).
    lead: html::LineLead,
    /// A comment a blank line may cut for Markdown, kept to read again (`html/reread.rs`),
    /// and how many views deep this view reads such a text (0: the text's own view).
    reread: Option<Box<html::Reread>>,
    reread_depth: u8,
}

impl Normalizer {
    pub fn new(mode: Normalize) -> Self {
        Normalizer {
            mode,
            raw_len: 0,
            out_len: 0,
            runs: VecDeque::new(),
            marks: Vec::new(),
            held: Vec::new(),
            word_latin: false,
            after_space: false,
            base: None,
            underscores: Vec::new(),
            underscores_after_word: false,
            text_after_cr: false,
            dense_readings: (0, 0),
            underscores_after_punctuation: false,
            after_spelled: false,
            mark_after_underscores: None,
            reference: Vec::new(),
            fragment: false,
            recent: String::new(),
            asides: Vec::new(),
            asides_from: 0,
            asides_bytes: 0,
            selectors: Vec::new(),
            selector_run: 0,
            carried: Vec::new(),
            bidi: Vec::new(),
            bidi_open: Vec::new(),
            bidi_trail: 0,
            bidi_context: String::new(),
            bidi_context_raw: 0,
            bidi_in_ruby: false,
            bidi_past_blank_line: false,
            refused: None,
            markup: Markup::Text,
            raw_text: None,
            tag: Vec::new(),
            hidden: Vec::new(),
            escape: None,
            brackets: 0,
            after_bracket: false,
            joins: [None, None],
            parked_browser: None,
            trailing_joins: Vec::new(),
            style_readings: Vec::new(),
            element_serial: 0,
            browser_css_depth: 0,
            after_break: false,
            after_zwsp: false,
            wbr: false,
            tag_raw: String::new(),
            tag_raw_at: 0,
            raw_text_end_at: 0,
            hidden_element: String::new(),
            attribute_name: String::new(),
            hidden_attribute: false,
            tag_may_hide: false,
            break_in_doubt: None,
            ignored_tag: false,
            forgotten: (Vec::new(), false),
            text_space_before: false,
            tag_element: String::new(),
            tag_closing: false,
            dir_attribute: false,
            self_closing: false,
            dir_value: String::new(),
            encoding_value: None,
            encoding_attribute: false,
            attribute_values: String::new(),
            raw_text_order: None,
            tag_srcdoc: false,
            svg_data_url: html::SvgDataUrl::default(),
            definition_url: None,
            css_value: 0,
            style_value: String::new(),
            presentation_value: String::new(),
            class_value: String::new(),
            id_value: String::new(),
            sheet: None,
            sheet_text: String::new(),
            sheet_raw: None,
            element_hidden: (Vec::new(), false),
            markdown_shown_from: None,
            line_marks: line_marks::LineMarks::default(),
            script_tail: String::new(),
            script_state: 0,
            open_elements: Vec::new(),
            html_open: Vec::new(),
            tables: Vec::new(),
            annotation_hidden: false,
            line_blank: false,
            lead: html::LineLead::default(),
            reread: None,
            reread_depth: 0,
        }
    }

    /// A normaliser for a piece of a pattern (see [`Normalizer::fragment`]).
    fn for_fragment(mode: Normalize) -> Self {
        Normalizer {
            fragment: true,
            ..Normalizer::new(mode)
        }
    }

    /// Bytes of raw text read.
    pub fn raw_len(&self) -> u64 {
        self.raw_len
    }

    /// Bytes of view written.
    pub fn out_len(&self) -> u64 {
        self.out_len
    }

    /// The raw position of the first character the view has not written yet (`None`: every
    /// character read is in the view).
    pub fn pending_start(&self) -> Option<u64> {
        let held = self.held.first().map(|u| u.raw);
        let marks = self.marks.iter().map(|(u, _)| u.raw).min();
        let underscores = self.underscores.first().map(|u| u.raw);
        let line_mark = self.line_marks.pending.first().map(|u| u.raw);
        let markdown_shown = self
            .markdown_shown_from
            .as_ref()
            .map(|(_, _, raw)| *raw)
            .filter(|&raw| join::still_held(raw, self.raw_len));
        let reference = self.reference.first().map(|u| u.raw);
        let selectors = self.selectors.first().map(|u| u.raw);
        let bidi = (!self.bidi.is_empty()).then_some(self.bidi_context_raw);
        let tag = self.tag.first().map(|u| u.raw);
        let hidden = self
            .hidden
            .first()
            .into_iter()
            .chain(self.element_hidden.0.first())
            .map(|u| u.raw)
            .min();
        let escape = self.escape.map(|u| u.raw);
        let asides = self.asides.first().map(aside::Aside::raw);
        let joins = self.joins_from();
        let tables = self.tables_from();
        let reread = self.reread.as_ref().and_then(|r| r.held_from());
        // A style sheet is held whole: what it hides is known at its end (`html/css.rs`).
        let sheet = self.sheet_raw;
        [
            sheet,
            reread,
            joins,
            tables,
            asides,
            held,
            marks,
            underscores,
            line_mark,
            markdown_shown,
            reference,
            selectors,
            bidi,
            tag,
            hidden,
            escape,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// A raw span the view could not read within its bounds (a bidi run longer than the
    /// bound with a control still open), taken once: the checks on this view treat it as a
    /// match, so what cannot be read is not passed.
    pub fn take_refusal(&mut self) -> Option<(u64, u64)> {
        self.refused.take()
    }

    /// Refuses raw `raw..raw_end` (see [`Normalizer::take_refusal`]), unless a refusal waits
    /// already (the first is kept).
    fn refuse(&mut self, raw: u64, raw_end: u64) {
        self.refused.get_or_insert((raw, raw_end));
    }

    /// Normalises the next piece; the view of it is returned (borrowed when the piece is its
    /// own view: ASCII with single spaces and nothing waiting, the common case). Plain ASCII
    /// stretches of a piece are copied whole; the rest goes character by character.
    pub fn feed<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        let base = self.raw_len;
        let plain = self.plain_prefix(text.as_bytes());
        if plain == text.len() {
            self.take_plain(base, text);
            self.raw_len += text.len() as u64;
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let (mut i, mut plain) = (0, plain);
        loop {
            // A plain stretch is copied whole; the character after it is not plain.
            if plain > 0 {
                out.push_str(&text[i..i + plain]);
                self.take_plain(base + i as u64, &text[i..i + plain]);
                i += plain;
            }
            let Some(c) = text[i..].chars().next() else {
                break;
            };
            let raw = base + i as u64;
            self.char(c, raw, raw + c.len_utf8() as u64, &mut out);
            i += c.len_utf8();
            plain = self.plain_prefix(&text.as_bytes()[i..]);
        }
        self.raw_len += text.len() as u64;
        Cow::Owned(out)
    }

    /// How many leading bytes of `bytes` are their own view: ASCII, no whitespace but single
    /// spaces, with nothing waiting before them.
    fn plain_prefix(&self, bytes: &[u8]) -> usize {
        if !self.marks.is_empty()
            || !self.held.is_empty()
            || !self.underscores.is_empty()
            || !self.reference.is_empty()
            || self.selector_run > 0
            || !self.carried.is_empty()
            || !self.bidi.is_empty()
            || self.markup != Markup::Text
            || self.escape.is_some()
            || self.after_bracket
            || self.definition_url.is_some()
            || self.joining()
            || !self.tables.is_empty()
            || self.after_zwsp
            || self.after_break
            || !self.asides.is_empty()
            || self.annotation_hidden
            || self.line_blank
            || self.lead.waits()
            || self.reread.is_some()
            || !self.line_marks.pending.is_empty()
        {
            return 0;
        }
        // At a line's start a block mark may come (`line_marks.rs`): a first character that
        // may be one (or white space before one) is read on its own.
        let markup = self.mode == Normalize::Full;
        if markup
            && !self.fragment
            && self.line_marks.at_start
            && bytes
                .first()
                .is_some_and(|&b| line_marks::may_start_mark(b))
        {
            return 0;
        }
        let mut after_space = self.after_space;
        for (i, &b) in bytes.iter().enumerate() {
            let space = b == b' ';
            if b >= 0x80
                || b == 0
                || (space && after_space)
                || (!space && is_ascii_space(b))
                || (markup
                    && (is_markup(b) || matches!(b, b'_' | b'&' | b'<' | b'[' | b']' | b'\\')))
            {
                return i;
            }
            after_space = space;
        }
        bytes.len()
    }

    /// A plain ASCII stretch at raw position `raw`, copied as it is.
    fn take_plain(&mut self, raw: u64, text: &str) {
        let Some(&last) = text.as_bytes().last() else {
            return;
        };
        if self.mode == Normalize::Full {
            self.ascii_word_state(text.as_bytes());
            self.lead.plain(text.as_bytes());
            // (Its first character is no mark: the line's start is past.)
            self.line_marks.at_start = false;
            self.after_spelled = false;
        }
        self.after_space = last == b' ';
        self.base = Some(char::from(last));
        let len = text.len() as u64;
        self.push_run(raw, raw + len, true, len);
        self.remember(text);
    }

    /// One character that is not plain ASCII (or comes after something waiting): the bidi
    /// stage records it, the carrier stage reads tag characters and selector runs, and the
    /// rest goes through markup (`full`) and the text stages.
    fn char(&mut self, c: char, raw: u64, raw_end: u64, out: &mut String) {
        self.asides_due(out);
        self.bidi_char(c, raw, raw_end, out);
        if self.mode == Normalize::Full {
            self.line_lead(c, raw, raw_end, out);
        }
        if self.carrier_char(c, raw, raw_end, out) {
            return;
        }
        if self.mode == Normalize::Full {
            if !self.tables.is_empty() {
                self.table_char(c, out);
            }
            self.join_char(c, raw, out);
            let before = self.bidi.len();
            self.html_char(c, raw, raw_end, false, out);
            // A run this character's markup opened where the character starts (a reference
            // without `;` that it ended, `&#8238tiurf`): the character is the run's first.
            if before == 0 && self.bidi.last().is_some_and(|u| u.raw == raw) {
                self.bidi_char(c, raw, raw_end, out);
            }
            return;
        }
        self.text_char(c, raw, raw_end, true, out);
    }

    /// A character a carrier spelled: text, never markup.
    fn spelled_char(&mut self, c: char, raw: u64, raw_end: u64, out: &mut String) {
        if self.mode == Normalize::Full {
            return self.html_char(c, raw, raw_end, true, out);
        }
        self.text_char(c, raw, raw_end, false, out);
    }

    /// One character past the Markdown stage; `literal` is false for a character a reference
    /// spelled, whose view maps to the whole reference.
    fn text_char(&mut self, c: char, raw: u64, raw_end: u64, literal: bool, out: &mut String) {
        if self.mode == Normalize::Full {
            self.segment_char(c, raw);
        }
        // (A browser drops U+0000 in text, joining what is around it: `forbid\0den`.)
        if c == '\0' {
            return;
        }
        if c.is_ascii() {
            let unit = Unit {
                c,
                raw,
                raw_end,
                exact: literal,
            };
            return self.starter(unit, out);
        }
        if is_blank(c) {
            let unit = Unit {
                c: ' ',
                raw,
                raw_end,
                exact: false,
            };
            return self.starter(unit, out);
        }
        if is_ignorable(c) {
            return;
        }
        if let Some(folded) = full_fold(c) {
            for f in folded.chars() {
                let unit = Unit {
                    c: f,
                    raw,
                    raw_end,
                    exact: false,
                };
                self.starter(unit, out);
            }
            return;
        }
        if let Some(space) = plain_space(c) {
            let unit = Unit {
                c: space,
                raw,
                raw_end,
                exact: false,
            };
            return self.starter(unit, out);
        }
        let mut parts = [char::default(); 18];
        let mut n = 0;
        decompose_compatible(c, |d| {
            if let Some(slot) = parts.get_mut(n) {
                *slot = d;
                n += 1;
            }
        });
        let exact = literal && n == 1 && parts[0] == c;
        for &d in &parts[..n] {
            if is_shared_mark(d) {
                // Drawn over a letter, read as the letter (`chars::is_shared_mark`).
                continue;
            }
            let unit = Unit {
                c: d,
                raw,
                raw_end,
                exact,
            };
            match canonical_combining_class(d) {
                0 => self.starter(unit, out),
                ccc => {
                    self.marks.push((unit, ccc));
                    if self.marks.len() > MAX_HELD {
                        self.flush_marks(out);
                    }
                }
            }
        }
    }

    /// The end of the text: whatever waited is written as it is.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.end_selector_run(&mut out);
        self.end_carried(&mut out);
        if self.mode == Normalize::Full {
            self.finish_html(&mut out);
        }
        self.finish_markup(&mut out);
        self.end_tables(&mut out);
        self.end_joins(&mut out);
        self.end_bidi(&mut out);
        self.write_asides(&mut out);
        self.flush_marks(&mut out);
        self.flush_held(false, &mut out);
        self.word_latin = false;
        self.after_space = false;
        self.base = None;
        out
    }

    /// An ASCII piece with nothing waiting: only the word state changes (the piece's last word,
    /// if it reaches the end, has a Latin letter or not).
    fn ascii_word_state(&mut self, bytes: &[u8]) {
        let is_word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
        let tail = bytes.iter().rev().take_while(|b| is_word(b)).count();
        let word = &bytes[bytes.len() - tail..];
        let latin = word.iter().any(u8::is_ascii_alphabetic);
        self.word_latin = if tail == bytes.len() {
            self.word_latin || latin
        } else {
            latin
        };
    }

    fn starter(&mut self, unit: Unit, out: &mut String) {
        self.flush_marks(out);
        self.base = Some(unit.c);
        self.unit(unit, out);
    }

    /// Writes the pending marks in canonical order (a reordered run maps to its whole span).
    pub(super) fn flush_marks(&mut self, out: &mut String) {
        if self.marks.is_empty() {
            return;
        }
        let mut marks = std::mem::take(&mut self.marks);
        if self.decorations(&marks) {
            // Dropped like invisible characters: their raw bytes stay inside a match around.
            marks.clear();
            self.marks = marks;
            return;
        }
        let sorted = marks.windows(2).all(|w| w[0].1 <= w[1].1);
        if !sorted {
            marks.sort_by_key(|(_, ccc)| *ccc);
            let raw = marks.iter().map(|(u, _)| u.raw).min().unwrap_or(0);
            let raw_end = marks.iter().map(|(u, _)| u.raw_end).max().unwrap_or(0);
            for (u, _) in &mut marks {
                *u = Unit {
                    c: u.c,
                    raw,
                    raw_end,
                    exact: false,
                };
            }
        }
        for (u, _) in marks.drain(..) {
            self.unit(u, out);
        }
        self.marks = marks;
    }

    /// Whether `marks` decorate a letter rather than make one: every mark on a Latin (or
    /// look-alike) letter does (strike-through, overlays, "Zalgo" stacks, and accents: a
    /// person reads the letter under them), so the letter reads alone. (The marks of the
    /// shared blocks never get here: `chars::is_shared_mark`.) Marks of other scripts'
    /// letters (Arabic vowels, Indic signs) are theirs.
    fn decorations(&self, _marks: &[(Unit, u8)]) -> bool {
        self.base
            .is_some_and(|b| matches!(class(b), Class::Latin | Class::LookAlike))
    }

    /// One character of the view, through the look-alike stage (`full`).
    fn unit(&mut self, unit: Unit, out: &mut String) {
        if self.mode != Normalize::Full {
            return self.emit(unit, out);
        }
        match class(unit.c) {
            Class::Latin => {
                if !self.word_latin {
                    self.word_latin = true;
                    self.flush_held(true, out);
                }
                // A Latin letter that renders as an ASCII one reads as it, in any word.
                let unit = if unit.c.is_ascii() {
                    unit
                } else {
                    as_latin(unit)
                };
                self.emit(unit, out);
            }
            Class::LookAlike if self.word_latin => self.emit(as_latin(unit), out),
            Class::LookAlike => self.hold(unit, out),
            Class::OtherWord if !self.held.is_empty() => self.hold(unit, out),
            Class::OtherWord => self.emit(unit, out),
            Class::NotWord => {
                self.flush_held(false, out);
                self.word_latin = false;
                self.emit(unit, out);
            }
        }
    }

    fn hold(&mut self, unit: Unit, out: &mut String) {
        self.held.push(unit);
        if self.held.len() > MAX_HELD {
            self.flush_held(false, out);
        }
    }

    /// Writes the held run: its look-alike letters as Latin when the word turned out mixed.
    fn flush_held(&mut self, mixed: bool, out: &mut String) {
        let mut held = std::mem::take(&mut self.held);
        for u in held.drain(..) {
            let u = if mixed && class(u.c) == Class::LookAlike {
                as_latin(u)
            } else {
                u
            };
            self.emit(u, out);
        }
        self.held = held;
    }

    /// Writes one character of the view; whitespace after a space is dropped (its raw bytes
    /// stay inside any match around them, as an ignorable's do).
    fn emit(&mut self, unit: Unit, out: &mut String) {
        let space = unit.c.is_ascii() && is_ascii_space(unit.c as u8);
        if space && self.after_space {
            return;
        }
        self.after_space = space;
        let unit = if space && unit.c != ' ' {
            Unit {
                c: ' ',
                exact: false,
                ..unit
            }
        } else {
            unit
        };
        out.push(unit.c);
        let len = unit.c.len_utf8() as u64;
        self.push_run(unit.raw, unit.raw_end, unit.exact, len);
        self.remember(unit.c.encode_utf8(&mut [0; 4]));
        self.join_written(unit.c, unit.raw);
        if !self.tables.is_empty() {
            self.table_written(unit.c, unit.raw, unit.raw_end);
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
            + self.marks.capacity() * std::mem::size_of::<(Unit, u8)>()
            + (self.held.capacity()
                + self.underscores.capacity()
                + self.reference.capacity()
                + self.selectors.capacity()
                + self.bidi.capacity()
                + self.tag.capacity()
                + self.hidden.capacity()
                + self.element_hidden.0.capacity())
                * std::mem::size_of::<Unit>()
            + self.recent.capacity()
            + self.bidi_context.capacity()
            + self
                .tables
                .iter()
                .map(html::Table::heap_bytes)
                .sum::<usize>()
            + self.bidi_open.capacity()
            + self.tag_raw.capacity()
            + self.sheet.as_ref().map_or(0, |s| s.heap_bytes())
            + self.sheet_text.capacity()
            + self.attribute_values.capacity()
            + self.reread.as_ref().map_or(0, |r| r.heap_bytes())
            + self
                .asides
                .iter()
                .map(aside::Aside::heap_bytes)
                .sum::<usize>()
            + self
                .joins
                .iter()
                .chain([&self.parked_browser])
                .flatten()
                .map(|j| std::mem::size_of::<join::Join>() + j.heap_bytes())
                .sum::<usize>()
            + self
                .trailing_joins
                .iter()
                .map(|j| std::mem::size_of::<join::Join>() + j.heap_bytes())
                .sum::<usize>()
            + self
                .style_readings
                .iter()
                .map(html::css::readings::StyleReading::heap_bytes)
                .sum::<usize>()
    }
}

fn as_latin(u: Unit) -> Unit {
    match latin_twin(u.c) {
        Some(c) => Unit {
            c,
            exact: false,
            ..u
        },
        None => u,
    }
}

/// The view of a whole text.
pub fn normalize_str(text: &str, mode: Normalize) -> String {
    view_of_whole(Normalizer::new(mode), text)
}

/// The view of a regex's literal, which is a piece of the text it matches (its `_` stays).
pub(super) fn normalize_fragment(text: &str, mode: Normalize) -> String {
    view_of_whole(Normalizer::for_fragment(mode), text)
}

fn view_of_whole(mut n: Normalizer, text: &str) -> String {
    if n.mode == Normalize::None {
        return text.to_owned();
    }
    let mut out = n.feed(text).into_owned();
    out.push_str(&n.finish());
    out
}

#[cfg(test)]
mod tests;
