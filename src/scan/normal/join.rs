//! Two readers of one text: a Markdown renderer and a browser reading HTML disagree on a few
//! constructs, and the view (which shows what either shows) reads one of them in line and the
//! other reading as an aside (`aside.rs`), recorded here.
//!
//! - **Autolinks** (`<ab:c>`, `<x@y.z>`): Markdown shows their text without the brackets (the
//!   view: `forbid<ab:c>den` is `forbidab:cden`), a browser hides them as elements it does not
//!   know: its reading, the text before the autolink joined to the text after it
//!   (`forbidden`), is the aside. What turns out to be no autolink (white space or a `<`
//!   before its `>`: Markdown shows it as text) is a tag to a browser, up to its `>` (the first
//!   outside a quoted attribute value), read the same way.
//! - **Images** (`![alt](destination)`): the view shows the alt text (what a model reads, and
//!   a browser when the image does not load); a person sees the image: the text before it
//!   joined to the text after it is the aside.
//! - **A blank line inside an element that hides text** (a ruby's annotation, foreign
//!   content): Markdown's paragraph ends there and closes it, so the view shows what follows;
//!   a browser reading HTML keeps it open: its reading, the text before the blank line joined
//!   to what follows the element's end, is the aside (`html/elements.rs`).
//! - **Tags CommonMark does not read as tags** (`<forbidden fr<!---->`, `<fo<q>`, an unclosed
//!   `<x y`): the view hides them as a browser does; Markdown shows them as written (their
//!   character references decoded): the view before, the tag's text and the view after are
//!   the aside.
//!
//! Each reading ([`BROWSER`], [`MARKDOWN`]) is recorded on its own: when a construct opens, the
//! view's last characters (at most [`REPLAY`](super::aside::REPLAY), back to the previous line break) are its
//! context; once it closes, the characters the view writes (not those of asides) are
//! recorded, and once [`TRAIL`] bytes of them were (or the text ends) the context followed by
//! them is the aside. Another construct of the same reading while one is recorded goes on from
//! that reading so far (its context is the earlier context and what was recorded, cut to its
//! last characters and held back from where they start: [`Written`]), so a word cut by several
//! reads whole. A reading holds back at most [`MAX_HOLD`](written::MAX_HOLD) raw bytes. Every split of the text
//! writes the same view, so the asides are the same.

use super::html::{attr, RAW_TEXT};
use super::Normalizer;
use std::sync::LazyLock;

mod written;
#[cfg(test)]
pub(super) use written::MAX_HOLD;
pub(super) use written::{reading_tail, still_held, Written};

/// What a Markdown renderer passes to the browser as HTML inside a `<…>` it does not read as
/// a tag, and the browser does not show: comments (a browser's `--!>` ends one too, as where
/// the renderer passes a whole block through), processing instructions, declarations, CDATA
/// sections, tags, and raw-text elements with their content.
static INNER_MARKUP: LazyLock<regex::Regex> = LazyLock::new(|| {
    let raw_text: Vec<String> = RAW_TEXT
        .iter()
        .map(|name| format!(r"<{name}(?:[\t\n\x0c\r /][^>]*)?>[\s\S]*?</{name}[^>]*>"))
        .collect();
    let pattern = format!(
        r"<!-->|<!--->|<!--[\s\S]*?--!?>|<\?[\s\S]*?>|<![A-Za-z\[][^>]*>|(?i:{})|{}",
        raw_text.join("|"),
        commonmark_tags()
    );
    regex::Regex::new(&pattern)
        .unwrap_or_else(|_| regex::Regex::new("^$").unwrap_or_else(|_| unreachable!()))
});

/// A raw-text element's start tag whose end tag is not inside the `<…>`: what follows is
/// hidden up to it.
static INNER_RAW_TEXT: LazyLock<regex::Regex> = LazyLock::new(|| {
    let pattern = format!(r"(?i)^<({})(?:[\t\n\x0c\r /][^>]*)?>$", RAW_TEXT.join("|"));
    regex::Regex::new(&pattern)
        .unwrap_or_else(|_| regex::Regex::new("^$").unwrap_or_else(|_| unreachable!()))
});

/// An inline image (`![alt](destination)`, no nested brackets): what a person sees of it in
/// a `<…>` Markdown shows as text is no text.
static INNER_IMAGE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"!\[[^\[\]]*\]\([^()\s]*(?:\s+(?:\x22[^\x22]*\x22|'[^']*'))?\s*\)")
        .unwrap_or_else(|_| regex::Regex::new("^$").unwrap_or_else(|_| unreachable!()))
});

/// CommonMark's raw HTML open and closing tags (spec 0.31.2, 6.6), as a regex.
fn commonmark_tags() -> String {
    let ws = r"[ \t\n\r\x0c]";
    let value = r#"(?:[^"'=<>`\x00-\x20]+|'[^']*'|"[^"]*")"#;
    let attribute = format!(r"{ws}+[a-zA-Z_:][a-zA-Z0-9_.:-]*(?:{ws}*={ws}*{value})?");
    format!(r"(?:<[A-Za-z][A-Za-z0-9-]*(?:{attribute})*{ws}*/?>|</[A-Za-z][A-Za-z0-9-]*{ws}*>)")
}

/// The longest tag kept for CommonMark's reading of it.
const MAX_TAG_TEXT: usize = 512;

/// CommonMark's raw HTML open and closing tags (spec 0.31.2, 6.6): a browser reads more as a
/// tag (`<forbidden fr<!---->`, `<fo<q>`), which Markdown shows as text.
static COMMONMARK_TAG: LazyLock<regex::Regex> = LazyLock::new(|| {
    let pattern = format!("^{}$", commonmark_tags());
    regex::Regex::new(&pattern)
        .unwrap_or_else(|_| regex::Regex::new("^$").unwrap_or_else(|_| unreachable!()))
});

/// Bytes of the view after an autolink that its aside joins to the context.
pub(super) const TRAIL: usize = 192;

/// How a block's break may be missing (`html/tag.rs`): in line (its own `display`, an end
/// tag that may close nothing: the white space around it is the words'), or side by side (a
/// layout's items: the white space between them is not shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unbroken {
    Inline,
    SideBySide,
}

/// The browser's reading (autolinks, images, no-autolinks).
pub(super) const BROWSER: usize = 0;
/// The Markdown renderer's reading (tags CommonMark does not read).
pub(super) const MARKDOWN: usize = 1;
/// Readings recorded at once (one of each).
pub(super) const READINGS: usize = 2;

/// One reading around a construct, being recorded.
#[derive(Debug, Clone, Default)]
pub(super) struct Join {
    /// The browser's text before the autolink, and the raw position where it starts.
    context: String,
    context_raw: u64,
    /// The autolink's `>` was read: the view after it is being recorded into `after`.
    closed: bool,
    after: Written,
    /// It was no autolink (white space or a `<` before its `>`: Markdown shows it as text), but
    /// a browser reads it as a tag up to its `>` (outside a quoted value: `quote`, `attr` as
    /// the view's tag reader keeps them); `gt`: that `>` was read.
    tag: bool,
    gt: bool,
    quote: Option<char>,
    attr: u8,
    /// Characters of that tag read (at most [`MAX_TAG`]: a tag that does not end by then
    /// writes no aside).
    read: usize,
    /// An image, `![alt](destination)`: a person sees the image, not its alt text (nor the
    /// `!`); `depth`: the brackets open inside its `[`, `alt`: its `]` was read, `destination`:
    /// its `(` was (the image ends with the destination's `)`).
    image: bool,
    depth: u32,
    alt: bool,
    destination: bool,
    /// A line break a browser removes: the white space recorded first is not shown.
    trim: bool,
    /// A break a block's tag makes, which its style may remove: the white space recorded first
    /// is not shown unless the text has white space of its own there (decided by the next raw
    /// character: the view folds both into one space).
    trim_unless_space: bool,
    /// Markdown's reading is inside a raw-text element (opened inside a `<…>` the view read
    /// as one tag): what the view writes is not recorded up to that element's end tag.
    raw_text: Option<String>,
    /// (The browser's reading where a blank line closed elements that hide text — a ruby's
    /// annotation, foreign content — for Markdown, and not for a browser: `html/elements.rs`.)
    /// The elements still hide what follows: nothing is recorded yet; `read`
    /// counts the characters meanwhile, and past [`MAX_TAG`] of them the context is no longer
    /// held back (`released`).
    waiting: bool,
    released: bool,
    /// Another context this construct's reading is written with too: the view's, when the
    /// reading went on from an earlier construct's (this construct hidden alone).
    alone: Option<(String, u64)>,
    /// A reading of an element drawn apart from the words around it (`boundary_reading`).
    boundary: bool,
}

/// Readings of marks and boundaries (`mark_dropped`, `boundary_reading`) one stretch of
/// [`DENSE_WINDOW`] raw bytes opens at most: each is a reading of its own (a mark may be
/// literal while the marks after it are emphasis: `x**forb*idd*en` shows `x**forbidden`), and
/// text dense with them (`*a*a*a…`, 64 KB: 0.3 s of a worker) is refused past the bound.
const MAX_DENSE_READINGS: u32 = 256;
const DENSE_WINDOW: u64 = 1024;

/// Readings that went on from another kept going with the later construct shown, at most.
const MAX_TRAILING: usize = 4;

/// The longest browser's tag read for its `>`.
const MAX_TAG: usize = 1024;

impl Join {
    /// A reading whose context (from raw `context_raw`) is taken where a construct opens at
    /// raw `raw`: held back unless the context is already [`MAX_HOLD`](written::MAX_HOLD) bytes behind.
    fn opening(context: String, context_raw: u64, raw: u64) -> Join {
        Join {
            released: !still_held(context_raw, raw),
            context,
            context_raw,
            ..Join::default()
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.context.capacity()
            + self.after.heap_bytes()
            + self.alone.as_ref().map_or(0, |(c, _)| c.capacity())
    }

    /// Where it is held back from: its context's start (or its other context's).
    fn held_from(&self) -> u64 {
        self.alone
            .as_ref()
            .map_or(self.context_raw, |(_, raw)| (*raw).min(self.context_raw))
    }

    pub(super) fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// A reading waiting for elements to end: its context, with its raw start.
    pub(super) fn waiting_context(self) -> (String, u64) {
        (self.context, self.context_raw)
    }

    /// A construct closed, what follows being recorded: the reading so far (its last line's
    /// tail), with its raw start.
    pub(super) fn recorded(&self) -> Option<(String, u64)> {
        if !self.closed || self.waiting || self.raw_text.is_some() {
            return None;
        }
        Some(self.so_far())
    }

    /// The reading so far as the context of one that goes on from it (`reading_tail`).
    fn so_far(&self) -> (String, u64) {
        reading_tail(&self.context, self.context_raw, &self.after, self.trim)
    }
}

impl Normalizer {
    /// A `<` starts a tag: its text is kept for CommonMark's reading of it.
    pub(super) fn tag_raw_start(&mut self, raw: u64) {
        self.tag_raw.clear();
        self.tag_raw.push('<');
        self.tag_raw_at = raw;
    }

    /// A character of the tag being read.
    pub(super) fn tag_raw_push(&mut self, c: char) {
        if !self.tag_raw.is_empty() && self.tag_raw.len() < MAX_TAG_TEXT {
            self.tag_raw.push(c);
        }
    }

    /// The context of a construct of `reading` opening: that reading recorded so far (another
    /// construct of it is being recorded), else the view's last characters.
    ///
    fn context(&mut self, reading: usize, raw: u64) -> (String, u64) {
        self.context_and_alone(reading, raw).0
    }

    /// [`Normalizer::context`], and the view's context when it went on from another
    /// construct's reading. Going on reads both hidden; the two other readings of the pair
    /// are kept too: the earlier reading goes on as the view shows the new construct
    /// (`trailing_joins`), and the new construct's reading may also be written from the
    /// view's context (its `alone`, for the constructs whose context is kept as is).
    fn context_and_alone(
        &mut self,
        reading: usize,
        raw: u64,
    ) -> ((String, u64), Option<(String, u64)>) {
        match self.joins[reading].take() {
            Some(j) if j.closed => {
                let so_far = j.so_far();
                let view = self.view_context(raw);
                if view.0 == so_far.0 {
                    return (so_far, None);
                }
                if !j.waiting && j.raw_text.is_none() && j.after.len() < TRAIL {
                    self.trailing_joins.push(*j);
                }
                (so_far, Some(view))
            }
            _ => (self.view_context(raw), None),
        }
    }

    /// The view's last characters as a reading's context, with their raw start (`raw` when
    /// there are none).
    pub(super) fn view_context(&self, raw: u64) -> (String, u64) {
        let (at, context) = self.replay_text();
        let context_raw = if context.is_empty() {
            raw
        } else {
            self.raw_start(at)
        };
        (context, context_raw)
    }

    /// A tag the view hid ended (`unclosed`: the text ended inside it). When CommonMark does
    /// not read it as a tag, a Markdown renderer shows it as written (its references decoded).
    pub(super) fn tag_ended(&mut self, unclosed: bool) {
        let text = std::mem::take(&mut self.tag_raw);
        if text.is_empty()
            || text.len() >= MAX_TAG_TEXT
            || (!unclosed && COMMONMARK_TAG.is_match(&text))
        {
            return;
        }
        let raw = self.tag_raw_at;
        let (mut context, context_raw) = self.context(MARKDOWN, raw);
        // What CommonMark does read inside it (a comment, a tag: `<fo<q>`) it hides.
        // A raw-text element opened (and not closed) inside it hides what follows, up to its
        // end tag.
        let inner = &text[1..];
        let (mut shown, mut raw_text, mut from) = (String::new(), None, 0);
        for m in INNER_MARKUP.find_iter(inner) {
            shown.push_str(&inner[from..m.start()]);
            from = m.end();
            if let Some(open) = INNER_RAW_TEXT
                .captures(m.as_str())
                .filter(|open| open.get(0).is_some_and(|o| o.len() == m.len()))
            {
                raw_text = Some(open[1].to_ascii_lowercase());
                from = inner.len();
                break;
            }
        }
        shown.push_str(&inner[from..]);
        // An image there is seen as the image, not its alt text (`<x![a](b) y`).
        let shown = INNER_IMAGE.replace_all(&shown, "");
        context.push('<');
        context.push_str(&super::markup::decode_references(&shown));
        self.joins[MARKDOWN] = Some(Box::new(Join {
            closed: true,
            raw_text,
            ..Join::opening(context, context_raw, raw)
        }));
    }

    /// A line break next to a U+200B (`segment.rs`): a browser shows none there, so the view
    /// before the white space is joined to what comes after it.
    pub(super) fn join_across_break(&mut self, raw: u64) {
        self.join_across(raw, None);
    }

    /// A Markdown mark the view drops right after a word (`x*forbidden`, `x[forbidden`,
    /// `fruit]x`): a person sees it where it makes no emphasis or link, a boundary between
    /// words. The view before it and a space, joined to what follows, is read too.
    /// (While a construct of the browser's reading is still open — an image's, whose brackets
    /// these may be — or it waits for elements, a reading of its own. A reading already
    /// recorded goes on from it: marks one after another are each a boundary.)
    /// A mark's or a boundary's reading opens at raw `raw`: past [`MAX_DENSE_READINGS`] in
    /// its stretch the text is refused, and no more are read (true), nor once it is refused.
    fn dense_readings(&mut self, raw: u64) -> bool {
        // (Refused already: the text is blocked whatever they would read.)
        if self.refused.is_some() {
            return true;
        }
        let (from, count) = &mut self.dense_readings;
        if raw / DENSE_WINDOW != *from / DENSE_WINDOW {
            (*from, *count) = (raw, 0);
        }
        *count += 1;
        if *count > MAX_DENSE_READINGS {
            let from = *from;
            self.refuse(from, raw + 1);
            return true;
        }
        false
    }

    pub(super) fn mark_dropped(&mut self, raw: u64) {
        if !self.base.is_some_and(crate::scan::text::is_word_char) {
            return;
        }
        if self.dense_readings(raw) {
            return;
        }
        // (The browser's reading busy — a construct of it open, elements it waits for: a
        // reading of its own, beside it.)
        if self.joins[BROWSER].as_ref().is_some_and(|j| !j.closed) || self.browser_waiting() {
            self.boundary_reading(raw);
            return;
        }
        let (mut context, context_raw) = self.context(BROWSER, raw);
        context.push(' ');
        self.joins[BROWSER] = Some(Box::new(Join {
            closed: true,
            trim: true,
            ..Join::opening(context, context_raw, raw)
        }));
    }

    /// A block's tag whose break may not be there (`html/tag.rs`): the view before it is
    /// joined to what comes after it.
    pub(super) fn join_across_block(&mut self, raw: u64, unbroken: Unbroken) {
        self.join_across(raw, Some(unbroken));
    }

    fn join_across(&mut self, raw: u64, block: Option<Unbroken>) {
        if self.browser_waiting() && !self.browser_wait_moves_aside() {
            return;
        }
        let (mut context, context_raw) = self.context(BROWSER, raw);
        let kept = context.trim_end_matches([' ', '\t']).len();
        context.truncate(kept);
        // Without the block's break, in line: the text's own white space before its tag (or
        // after it: the next raw character decides) is a space. Side by side (a flex or grid
        // layout's items): none is.
        let inline = block == Some(Unbroken::Inline);
        let space = inline && self.text_space_before;
        if space {
            context.push(' ');
        }
        self.joins[BROWSER] = Some(Box::new(Join {
            closed: true,
            trim: !inline || space,
            trim_unless_space: inline && !space,
            ..Join::opening(context, context_raw, raw)
        }));
    }

    /// An autolink opens at raw `raw` (its `<`).
    pub(super) fn open_join(&mut self, raw: u64) {
        self.park_waiting_browser();
        self.open_reading(raw);
    }

    /// A browser reading the text as HTML waits for elements that hide what comes (an `<svg>`
    /// a code block showed as text to Markdown): that reading does not see a construct of the
    /// rendered Markdown (an image, to it `![a](b)` is text), the reader of the rendered
    /// Markdown does (and reads an autolink in an HTML block as a tag). Its reading is put
    /// aside while the construct's is recorded (`parked_browser`).
    fn park_waiting_browser(&mut self) {
        if self.parked_browser.is_none()
            && self.browser_waiting()
            && !self.browser_wait_moves_aside()
        {
            self.parked_browser = self.joins[BROWSER].take();
        }
    }

    /// The browser's reading of a construct it hides, opening at raw `raw`.
    fn open_reading(&mut self, raw: u64) {
        let ((context, context_raw), alone) = self.context_and_alone(BROWSER, raw);
        self.joins[BROWSER] = Some(Box::new(Join {
            alone,
            ..Join::opening(context, context_raw, raw)
        }));
    }

    /// A `[` after a `!` the view wrote (`depth`: the brackets open with it): an image's alt
    /// text may start, which a person does not see.
    pub(super) fn open_image(&mut self, raw: u64, depth: u32) {
        if !self.recent.ends_with('!') {
            return;
        }
        self.markdown_tag_in_foreign_content(raw, raw + 1);
        self.park_waiting_browser();
        self.open_reading(raw);
        if let Some(j) = &mut self.joins[BROWSER] {
            // The `!` is no text of the image's reader either (nor of the view's context,
            // when the reading went on from an earlier construct's).
            for context in [Some(&mut j.context), j.alone.as_mut().map(|(c, _)| c)]
                .into_iter()
                .flatten()
            {
                if context.ends_with('!') {
                    context.pop();
                }
            }
            j.image = true;
            j.depth = depth;
        }
    }

    /// A `]` with `depth` brackets open before it: the end of an image's alt text.
    pub(super) fn image_bracket(&mut self, depth: u32) {
        if let Some(j) = &mut self.joins[BROWSER] {
            if j.image && !j.alt && depth == j.depth {
                j.alt = true;
            }
        }
    }

    /// The `)` that ends a link destination: an image's, the end of the image.
    pub(super) fn image_end(&mut self) {
        if let Some(j) = &mut self.joins[BROWSER] {
            if j.image && j.destination {
                j.closed = true;
            }
        }
    }

    /// The autolink's `>` (`true`) or the end of what was read as one (`false`: it was not an
    /// autolink, and a browser's tag goes on to its `>`).
    pub(super) fn close_join(&mut self, autolink: bool) {
        if let Some(j) = self.joins[BROWSER].as_mut().filter(|j| !j.waiting) {
            if autolink {
                j.closed = true;
            } else {
                j.tag = true;
            }
        }
    }

    /// An end tag `name` ended: Markdown's reading inside that raw-text element goes on.
    pub(super) fn join_end_tag(&mut self, name: &str) {
        if let Some(j) = &mut self.joins[MARKDOWN] {
            if j.raw_text.as_deref() == Some(name) {
                j.raw_text = None;
            }
        }
    }

    /// Where the earliest reading being recorded starts (its context): held back, so a match
    /// in its aside blocks before any of it is released.
    pub(super) fn joins_from(&self) -> Option<u64> {
        self.joins
            .iter()
            .chain([&self.parked_browser])
            .flatten()
            .map(|j| &**j)
            .chain(self.trailing_joins.iter())
            .filter(|j| !j.released)
            .map(Join::held_from)
            .chain(self.style_readings_from())
            .min()
    }

    /// The browser's reading goes on from `text` (from raw `raw`): the next construct of it
    /// takes it as its context.
    pub(super) fn resume_browser_reading(&mut self, text: String, raw: u64) {
        self.joins[BROWSER] = Some(Box::new(Join {
            context: text,
            context_raw: raw,
            closed: true,
            ..Join::default()
        }));
    }

    /// An element a browser draws apart from the words around it (`html/elements.rs`), its tag
    /// at raw `raw` right after a word character: the view before it and a space, joined to
    /// what follows, is read too — a reading of its own, beside the browser's (whose other
    /// constructs it does not take the place of).
    pub(super) fn boundary_reading(&mut self, raw: u64) {
        if !self.base.is_some_and(crate::scan::text::is_word_char) {
            return;
        }
        if self.dense_readings(raw) {
            return;
        }
        // (From the view, and from the last such reading still recording: both of an
        // element's tags are boundaries in one reading.)
        let chained = self
            .trailing_joins
            .last()
            .filter(|j| j.boundary && j.after.len() < TRAIL)
            .map(Join::so_far);
        for (mut context, context_raw) in [Some(self.view_context(raw)), chained]
            .into_iter()
            .flatten()
        {
            context.push(' ');
            self.trailing_joins.push(Join {
                closed: true,
                trim: true,
                boundary: true,
                ..Join::opening(context, context_raw, raw)
            });
        }
    }

    /// A reading whose context is `text` (from raw `context_raw`), going on with what the view
    /// writes from raw `raw` on, up to its bound (a trailing reading).
    pub(super) fn trail_reading(&mut self, text: String, context_raw: u64, raw: u64) {
        self.trailing_joins.push(Join {
            closed: true,
            ..Join::opening(text, context_raw, raw)
        });
    }

    /// A blank line closed elements hiding text (Markdown's reading), which a browser reading
    /// HTML keeps open: its reading waits for their end.
    pub(super) fn open_html_join(&mut self, raw: u64) {
        let ((context, context_raw), alone) = self.context_and_alone(BROWSER, raw);
        self.joins[BROWSER] = Some(Box::new(Join {
            waiting: true,
            alone,
            ..Join::opening(context, context_raw, raw)
        }));
    }

    /// The browser's reading of the text as HTML: put aside while an image's is recorded,
    /// else the one being recorded.
    fn html_reading(&mut self) -> Option<&mut Join> {
        self.parked_browser
            .as_deref_mut()
            .or(self.joins[BROWSER].as_deref_mut())
    }

    /// Those elements ended: what the view writes now follows the context.
    pub(super) fn close_html_join(&mut self) {
        if let Some(j) = self.html_reading() {
            // (A context released while they hid the text stays released: it was sent.)
            j.waiting = false;
            j.closed = true;
        }
    }

    /// The white space the browser's reading records next is not shown (a break of a block
    /// the browser did not show).
    pub(super) fn browser_reading_trims(&mut self) {
        if let Some(j) = self.html_reading() {
            if j.after.len() == 0 {
                j.trim = true;
            }
        }
    }

    /// The browser's reading being recorded (closed: its context and what followed), taken
    /// to go on elsewhere (`html/table.rs`), with its raw start.
    pub(super) fn browser_reading(&mut self) -> Option<(String, u64)> {
        let j = self.joins[BROWSER].take_if(|j| j.closed && !j.waiting)?;
        Some(j.so_far())
    }

    /// Whether the browser does not show what the view writes now: a construct it hides is
    /// being read (an autolink, an image), or elements hide it (past a blank line).
    pub(super) fn browser_hides_now(&self) -> bool {
        self.joins[BROWSER]
            .as_ref()
            .is_some_and(|j| !j.closed || j.waiting)
            || self.browser_waiting()
    }

    /// Whether the browser's reading waits for elements that hide what comes (which hide
    /// the constructs inside them too).
    pub(super) fn browser_waiting(&self) -> bool {
        self.parked_browser
            .as_ref()
            .or(self.joins[BROWSER].as_ref())
            .is_some_and(|j| j.waiting)
    }

    /// Whether a reading is being recorded.
    pub(super) fn joining(&self) -> bool {
        self.joins.iter().any(Option::is_some)
            || self.parked_browser.is_some()
            || !self.trailing_joins.is_empty()
    }

    /// The browser's reading put aside for an image's: back once the image's is written
    /// (if the elements it waited for end before, it records what follows meanwhile).
    fn unpark_browser(&mut self) {
        if self.joins[BROWSER].is_none() {
            self.joins[BROWSER] = self.parked_browser.take();
        }
    }

    /// A raw character (at raw `raw`), before the rest of the view reads it: it moves a
    /// construct of the browser's reading on; enough recorded writes an aside.
    pub(super) fn join_char(&mut self, c: char, raw: u64, out: &mut String) {
        if let Some(j) = &mut self.joins[BROWSER] {
            if j.image && !j.closed {
                // An image's `]` is followed by its destination's `(`, else it was no image.
                if j.alt && !j.destination {
                    if c == '(' {
                        j.destination = true;
                    } else {
                        self.joins[BROWSER] = None;
                    }
                } else {
                    // Line breaks may come in the alt text and the destination; a bound ends
                    // an image that never does.
                    j.read += 1;
                    if j.read > MAX_TAG {
                        self.joins[BROWSER] = None;
                    }
                }
            } else if j.tag && !j.closed {
                if j.gt {
                    j.closed = true;
                } else {
                    j.read += 1;
                    if j.read > MAX_TAG {
                        self.joins[BROWSER] = None;
                    } else {
                        match j.quote {
                            Some(q) if c == q => j.quote = None,
                            Some(_) => {}
                            None if c == '>' => j.gt = true,
                            None if j.attr == attr::BEFORE_VALUE && (c == '"' || c == '\'') => {
                                j.quote = Some(c);
                                j.attr = attr::BEFORE_NAME;
                            }
                            None => j.attr = attr::next(j.attr, c),
                        }
                    }
                }
            }
        }
        self.unpark_browser();
        if let Some(j) = self.joins[BROWSER].as_mut().filter(|j| j.trim_unless_space) {
            j.trim_unless_space = false;
            j.trim = !c.is_whitespace();
        }
        for j in self
            .joins
            .iter_mut()
            .chain([&mut self.parked_browser])
            .flatten()
            .map(|j| &mut **j)
            .chain(self.trailing_joins.iter_mut())
        {
            if j.waiting {
                j.read += 1;
                j.released |= j.read > MAX_TAG;
            }
            j.released |= !still_held(j.held_from(), raw);
        }
        // Trailing readings end at their bound (the oldest at once past their count).
        while let Some(i) = self
            .trailing_joins
            .iter()
            .position(|j| j.after.len() >= TRAIL)
            .or((self.trailing_joins.len() > MAX_TRAILING).then_some(0))
        {
            let j = self.trailing_joins.remove(i);
            self.write_join(j, out);
        }
        for reading in [BROWSER, MARKDOWN] {
            // A line break is white space in the view, and a soft break in Markdown: the
            // recording goes on through it, up to its bound.
            if self.joins[reading]
                .as_ref()
                .is_some_and(|j| j.closed && j.after.len() >= TRAIL)
            {
                self.end_join(reading, out);
            }
        }
        if !self.style_readings.is_empty() {
            self.style_readings_char(raw, out);
        }
    }

    /// A character the view writes (not in an aside), from raw `raw`: recorded after a
    /// closed construct.
    pub(super) fn join_written(&mut self, c: char, raw: u64) {
        for j in self.joins.iter_mut().flatten() {
            if j.closed && j.raw_text.is_none() {
                j.after.push(c, raw);
            }
        }
        // (Put aside, it records up to its bound: images one after another keep it aside; so
        // do the readings trailing another.)
        let parked = self.parked_browser.as_deref_mut().filter(|j| j.closed);
        for j in parked.into_iter().chain(self.trailing_joins.iter_mut()) {
            if j.after.len() < TRAIL {
                j.after.push(c, raw);
            }
        }
        if !self.style_readings.is_empty() {
            self.style_readings_written(c, raw);
        }
    }

    /// Writes a reading — its context and what the view wrote since the construct closed — as
    /// an aside, when text followed it.
    pub(super) fn end_join(&mut self, reading: usize, out: &mut String) {
        if let Some(j) = self.joins[reading].take() {
            self.write_join(*j, out);
        }
    }

    /// Writes one reading (and with its other context, if any).
    fn write_join(&mut self, j: Join, out: &mut String) {
        // Written even with nothing after the construct: its reading ends a word there (the
        // view's `fruit<ab:c>` is `fruitab:c`) and may carry an earlier construct's. Elements
        // the text ended in hide the rest: the context is the reading.
        if !(j.closed || j.waiting)
            || (j.context.trim().is_empty() && j.after.as_str().trim().is_empty())
        {
            return;
        }
        let Join {
            context,
            context_raw,
            alone,
            after,
            trim,
            ..
        } = j;
        let after = after.shown(trim);
        let raw_end = self.raw_end(self.out_len);
        for (context, raw) in [(context, context_raw)].into_iter().chain(alone) {
            let mut text = context;
            text.push_str(after);
            self.aside(&text, raw, raw_end, out);
        }
    }

    /// The end of the text: every reading recorded is written.
    pub(super) fn end_joins(&mut self, out: &mut String) {
        for reading in [BROWSER, MARKDOWN] {
            self.end_join(reading, out);
        }
        if let Some(parked) = self.parked_browser.take() {
            self.joins[BROWSER] = Some(parked);
            self.end_join(BROWSER, out);
        }
        for j in std::mem::take(&mut self.trailing_joins) {
            self.write_join(j, out);
        }
        self.end_style_readings(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commonmark_reads_these_as_tags_and_not_those() {
        for tag in [
            "<b>",
            "</b >",
            "<a href='x' title=\"y\">",
            "<x-y/>",
            "<a b=c d>",
        ] {
            assert!(COMMONMARK_TAG.is_match(tag), "{tag}");
        }
        for not in [
            "<a/b>",
            "<o:p>",
            "<fo<q>",
            "<forbidden fr<!---->",
            "<a b=\"c>",
            "< b>",
        ] {
            assert!(!COMMONMARK_TAG.is_match(not), "{not}");
        }
        assert_eq!(
            INNER_IMAGE.replace_all("a![b](c)d![e](f \"g\")h", ""),
            "adh"
        );
        assert_eq!(
            INNER_MARKUP.replace_all("fo<q>x<!-- c -->y<!-->", ""),
            "foxy"
        );
        assert_eq!(
            INNER_MARKUP.replace_all(
                "a<!DOCTYPE x>b<?p?>c<![CDATA[d]]>e<!--f--!>g<SCRIPT>h</script>i",
                ""
            ),
            "abcegi"
        );
    }
}
