//! Bidirectional controls: text shown in another order than it is written.
//!
//! An override, embedding or isolate (U+202A..U+202E, U+2066..U+2068) changes the order in
//! which a renderer shows what follows: RLO + `dribeulb tcejorp` + PDF is shown as
//! `project bluebird`, while a model reads the characters in the order they came. The view
//! keeps the written order (the model's reading: the text flows on into the view at once) and
//! adds the shown order as an aside (`aside.rs`): from the first control, the raw characters
//! are recorded, with the view's last characters before it as context (the paragraph's text
//! before the control, at most [`REPLAY`](super::aside::REPLAY) characters), and once the
//! controls' run ends, the recorded text is reordered by the Unicode Bidirectional Algorithm
//! (UAX #9, the `unicode-bidi` crate: the paragraph's direction from its first strong
//! character, marks (LRM, RLM, ALM) included) and written as an aside when its order differs.
//!
//! A run ends at the end of its paragraph (a line break or paragraph separator: a control
//! without its closing PDF or PDI reaches that far, as UAX #9 says), at the end of the text, or
//! [`TRAIL`] characters after its last control closed (so the shown text around the run is in
//! the aside). With `full`, a blank line with a control open does not end it: a Markdown
//! renderer ends the paragraph there, a browser reading HTML does not (a blank line is white
//! space to it, and `<bdo>` stays open), so the run is read both ways — as one paragraph, and
//! as paragraphs each ordered on its own. Every split of the text records the same characters,
//! so the view is the same.
//!
//! Bound: the raw bytes from the context on wait in the hold-back until the aside is written.
//! A run longer than [`MAX_BIDI`] characters is written then, and if a control is still open
//! there, the span is *refused* ([`Normalizer::take_refusal`]): the checks that read this view
//! count it as a match (fail closed), as the order a renderer shows past that point depends on
//! where it breaks lines. A run that went on through a blank line is not refused (one stray
//! control, one `<bdo>` a code span shows, must not refuse a long answer): it goes on from its
//! last [`TRAIL`] characters, its controls still open.

use super::chars::{is_bidi_closer, is_bidi_opener, is_paragraph_end};
use super::html::{not_shown, VOID};
use super::{Normalizer, Unit};
use std::sync::LazyLock;
use unicode_bidi::BidiInfo;

/// Characters recorded after the last control closed.
pub(super) const TRAIL: usize = 64;

/// The longest run of text under bidi controls that is read (see the module docs).
pub(super) const MAX_BIDI: usize = 1024;

/// Bidi controls open at once past which a run is refused ([`Normalizer::bidi_too_deep`]).
const MAX_BIDI_DEPTH: usize = 30;

impl Normalizer {
    /// The bidi stage for one raw character, before the rest of the view: it records the run
    /// of controls the character is in (if any). A paragraph end writes the run's aside before
    /// the character goes on.
    pub(super) fn bidi_char(&mut self, c: char, raw: u64, raw_end: u64, out: &mut String) {
        if self.bidi.is_empty() {
            if !is_bidi_opener(c) {
                return;
            }
            self.start_bidi_run(raw);
        }
        if is_paragraph_end(c) && self.ends_paragraph(c) {
            return self.end_bidi(out);
        }
        if c == '\n' && !self.bidi_open.is_empty() && self.after_blank_line() {
            self.bidi_past_blank_line = true;
        }
        self.bidi.push(Unit {
            c,
            raw,
            raw_end,
            exact: true,
        });
        if is_bidi_opener(c) {
            self.bidi_open.push(matches!(c, '\u{2066}'..='\u{2068}'));
            self.bidi_trail = 0;
            self.bidi_too_deep(raw_end);
        } else if is_bidi_closer(c) {
            self.close_bidi(c == '\u{2069}');
        } else if self.bidi_open.is_empty() {
            self.bidi_trail += 1;
        }
        if self.bidi.len() > MAX_BIDI {
            if self.bidi_past_blank_line && !self.bidi_open.is_empty() {
                return self.restart_bidi(out);
            }
            if !self.bidi_open.is_empty() {
                self.refused = Some((self.bidi_context_raw, raw_end));
            }
            self.end_bidi(out);
        } else if self.bidi_open.is_empty() && self.bidi_trail >= TRAIL {
            self.end_bidi(out);
        }
    }

    /// Whether the paragraph end `c` ends the run: to a renderer of HTML or Markdown
    /// (`full`) a line break is a space within the paragraph; a blank line ends a Markdown
    /// paragraph but is white space to a browser reading HTML, so with a control still open the
    /// run goes on (both readings are written at its end); in plain text (`nfkc`) every line is
    /// a paragraph.
    fn ends_paragraph(&self, c: char) -> bool {
        if self.mode != super::Normalize::Full || !matches!(c, '\n' | '\r') {
            return true;
        }
        c == '\n' && self.bidi_open.is_empty() && self.after_blank_line()
    }

    /// A run past the bound that went on through a blank line (a browser reading HTML keeps
    /// its controls open, a Markdown renderer has closed them: a stray control in one paragraph,
    /// an `<bdo>` a code span shows, must not refuse a long answer): its readings so far are
    /// written, and it goes on from its last [`TRAIL`] characters with the controls still open,
    /// so a phrase shown across the cut is read whole.
    fn restart_bidi(&mut self, out: &mut String) {
        let from = self.bidi.len().saturating_sub(TRAIL);
        let at = self.bidi[from].raw;
        // The openers still open (as `close_bidi` closes them), spelled again where the kept
        // characters start.
        let mut open: Vec<char> = Vec::new();
        for u in &self.bidi[..from] {
            if is_bidi_opener(u.c) {
                open.push(u.c);
            } else if u.c == '\u{2069}' {
                if let Some(i) = open.iter().rposition(|&c| is_isolate(c)) {
                    open.truncate(i);
                }
            } else if is_bidi_closer(u.c) && open.last().is_some_and(|&c| !is_isolate(c)) {
                open.pop();
            }
        }
        let mut kept: Vec<Unit> = open
            .into_iter()
            .map(|c| Unit {
                c,
                raw: at,
                raw_end: at,
                exact: false,
            })
            .collect();
        kept.extend_from_slice(&self.bidi[from..]);
        let (open, trail, in_ruby) = (
            std::mem::take(&mut self.bidi_open),
            self.bidi_trail,
            self.bidi_in_ruby,
        );
        self.end_bidi(out);
        self.bidi = kept;
        self.bidi_open = open;
        self.bidi_trail = trail;
        self.bidi_context_raw = at;
        self.bidi_in_ruby = in_ruby;
        self.bidi_past_blank_line = true;
    }

    /// Whether the run's last line is blank (a line break now ends a Markdown paragraph).
    fn after_blank_line(&self) -> bool {
        self.bidi
            .iter()
            .rev()
            .find(|u| !matches!(u.c, ' ' | '\t' | '\r'))
            .is_some_and(|u| u.c == '\n')
    }

    /// A run starts at raw `raw`: the view's text before it is its context.
    fn start_bidi_run(&mut self, raw: u64) {
        let (at, context) = self.replay_text();
        self.bidi_context_raw = if context.is_empty() {
            raw
        } else {
            self.raw_start(at)
        };
        self.bidi_context = context;
        self.bidi_in_ruby = self.open_elements.iter().any(|e| e.is("ruby"));
    }

    /// A control that markup spells (`<bdo>`'s override, a character reference), read where
    /// its markup ends, at raw `at` (`html/elements.rs`, `markup.rs`): it opens a run as if
    /// written there.
    pub(super) fn bidi_open_spelled(&mut self, c: char, at: u64) {
        if self.bidi.is_empty() {
            self.start_bidi_run(at);
        }
        self.bidi.push(Unit {
            c,
            raw: at,
            raw_end: at,
            exact: false,
        });
        self.bidi_open.push(matches!(c, '\u{2066}'..='\u{2068}'));
        self.bidi_trail = 0;
        self.bidi_too_deep(at);
    }

    /// The controls of the run being recorded still open, outermost first (an embedding or
    /// override a PDF closes, an isolate a PDI closes with those inside it): what a text read
    /// apart from here is shown under (`html/reread.rs`).
    pub(super) fn bidi_controls_open(&self) -> String {
        let mut open: Vec<char> = Vec::new();
        for u in &self.bidi {
            let isolate = |c: &char| matches!(c, '\u{2066}'..='\u{2068}');
            match u.c {
                c if is_bidi_opener(c) => open.push(c),
                '\u{202C}' if open.last().is_some_and(|c| !isolate(c)) => {
                    open.pop();
                }
                '\u{2069}' => {
                    if let Some(i) = open.iter().rposition(isolate) {
                        open.truncate(i);
                    }
                }
                _ => {}
            }
        }
        open.into_iter().collect()
    }

    /// Controls nested past [`MAX_BIDI_DEPTH`] are refused: a renderer's embedding levels
    /// overflow there (Unicode's bidi algorithm stops at 125 levels, each override and isolate
    /// taking one or two), which the view does not model — no text nests them so deep.
    fn bidi_too_deep(&mut self, raw_end: u64) {
        if self.bidi_open.len() > MAX_BIDI_DEPTH {
            self.refuse(self.bidi_context_raw, raw_end);
        }
    }

    /// Closers that markup spells (`</bdo>`'s PDF and PDI, a reference to PDF or PDI), whose
    /// markup starts at raw `at`: each closes before the markup (whose characters the run has
    /// recorded already, and now count after the close), in order.
    pub(super) fn bidi_close_spelled(&mut self, closers: &[char], at: u64) {
        let mut i = self
            .bidi
            .iter()
            .position(|u| u.raw >= at)
            .unwrap_or(self.bidi.len());
        for &c in closers {
            let isolate = c == '\u{2069}';
            let closes = if isolate {
                self.bidi_open.contains(&true)
            } else {
                self.bidi_open.last() == Some(&false)
            };
            if !closes {
                continue;
            }
            self.bidi.insert(
                i,
                Unit {
                    c,
                    raw: at,
                    raw_end: at,
                    exact: false,
                },
            );
            i += 1;
            self.close_bidi(isolate);
        }
        if self.bidi_open.is_empty() {
            self.bidi_trail = self.bidi.len().saturating_sub(i);
        }
    }

    /// A PDF closes the last embedding or override (not past an isolate); a PDI closes the
    /// last isolate and everything opened inside it; an unmatched closer does nothing (UAX #9).
    fn close_bidi(&mut self, isolate: bool) {
        if isolate {
            if let Some(i) = self.bidi_open.iter().rposition(|&iso| iso) {
                self.bidi_open.truncate(i);
            }
        } else if self.bidi_open.last() == Some(&false) {
            self.bidi_open.pop();
        }
        if self.bidi_open.is_empty() {
            self.bidi_trail = 0;
        }
    }

    /// Ends the recorded run: its shown order, when it differs, is written as an aside.
    pub(super) fn end_bidi(&mut self, out: &mut String) {
        let Some(last) = self.bidi.last().copied() else {
            return;
        };
        let context = std::mem::take(&mut self.bidi_context);
        let run: String = self.bidi.iter().map(|u| u.c).collect();
        let raw = self.bidi_context_raw;
        self.bidi.clear();
        self.bidi_open.clear();
        self.bidi_trail = 0;
        self.bidi_past_blank_line = false;
        // The run as its reader is shown it: as rendered (`full`: and, when it holds Markdown's
        // marks, as a Markdown renderer shows it too, without them), or as written.
        let mut readings = Vec::with_capacity(4);
        let mut readings_alone = Vec::new();
        if self.mode == super::Normalize::Full {
            let in_ruby = self.bidi_in_ruby;
            let rendered = as_rendered(&run, in_ruby, false);
            // Elements a style or an attribute may hide, hidden (a browser's reading of them:
            // `html/css/readings.rs`), ordered with the context and without it (the context
            // may hold such an element's text too).
            let unstyled = as_rendered(&run, in_ruby, true);
            if unstyled != rendered {
                readings.push(unstyled.clone());
            }
            if !context.is_empty() {
                readings_alone.push(unstyled);
            }
            if rendered.contains(MARKDOWN_MARKS) {
                readings.push(rendered.replace(MARKDOWN_MARKS, ""));
            }
            // A run through a blank line: a browser reading HTML shows it as one paragraph
            // (above), a Markdown renderer as paragraphs each ordered on its own, their
            // elements closed where each ends.
            if BLANK_LINE.is_match(&run) {
                let paragraphs: Vec<String> = BLANK_LINE
                    .split(&run)
                    .enumerate()
                    .map(|(i, p)| {
                        as_rendered(p, in_ruby && i == 0, false).replace(MARKDOWN_MARKS, "")
                    })
                    .collect();
                readings.push(paragraphs.join("\u{2029}"));
            }
            readings.push(rendered);
        } else {
            readings.push(run);
        }
        let with_context = readings.into_iter().map(|r| (true, r));
        for (joined, reading) in with_context.chain(readings_alone.into_iter().map(|r| (false, r)))
        {
            let logical = if joined {
                format!("{context}{reading}")
            } else {
                reading
            };
            let shown = ordered(&logical, None);
            if shown != plain(&logical) {
                self.aside(&shown, raw, last.raw_end, out);
            }
        }
    }

    /// Text a browser shows apart from the text around it — an attribute's value (an
    /// `<input>`'s, an image's `alt`), a `<textarea>`'s text — as it is shown: ordered by its
    /// own bidi controls, in its element's direction (`rtl`; none: its first strong
    /// character's), its order overridden when the element's style says so (`overrides`).
    /// Written as an aside when that order differs from the written one. Each paragraph of
    /// `text` (U+2029 between attribute values) is ordered on its own.
    pub(super) fn shown_apart(
        &mut self,
        text: &str,
        rtl: Option<bool>,
        overrides: bool,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) {
        if !overrides && !has_bidi_control(text) {
            return;
        }
        let logical = if overrides {
            let open = if rtl == Some(true) {
                '\u{202E}'
            } else {
                '\u{202D}'
            };
            let mut forced = String::with_capacity(text.len() + 8);
            for (i, paragraph) in text.split(['\u{2029}', '\n', '\r']).enumerate() {
                if i > 0 {
                    forced.push('\u{2029}');
                }
                forced.push(open);
                forced.push_str(paragraph);
                forced.push('\u{202C}');
            }
            forced
        } else {
            text.to_owned()
        };
        let shown = ordered(&logical, rtl);
        if shown != plain(text) && shown.chars().any(char::is_alphanumeric) {
            self.aside(&shown, raw, raw_end, out);
        }
    }
}

/// Whether `text` holds a bidi control or mark (what [`Normalizer::shown_apart`] orders by).
pub(super) fn has_bidi_control(text: &str) -> bool {
    text.contains(is_control)
}

/// `logical` as a renderer shows it: each paragraph ordered by the Unicode Bidirectional
/// Algorithm (its direction `rtl`, or none: its first strong character's), read one after the
/// other with a space between, the controls dropped.
fn ordered(logical: &str, rtl: Option<bool>) -> String {
    let level = rtl.map(|rtl| {
        if rtl {
            unicode_bidi::Level::rtl()
        } else {
            unicode_bidi::Level::ltr()
        }
    });
    let info = BidiInfo::new(logical, level);
    let mut shown = String::with_capacity(logical.len());
    for para in &info.paragraphs {
        shown.push_str(&info.reorder_line(para, para.range.clone()));
        shown.push(' ');
    }
    plain(&shown)
}

/// Text as read without its bidi controls, paragraphs one after the other with a space
/// between.
fn plain(text: &str) -> String {
    let text: String = text
        .chars()
        .filter(|&c| !is_control(c))
        .map(|c| if c == '\u{2029}' { ' ' } else { c })
        .collect();
    text.trim_end_matches(' ').to_owned()
}

/// A blank line: the end of a Markdown paragraph.
static BLANK_LINE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"\n[ \t\r]*\n")
        .unwrap_or_else(|_| regex::Regex::new("^$").unwrap_or_else(|_| unreachable!()))
});

/// Markdown's inline marks, which a Markdown renderer does not show.
const MARKDOWN_MARKS: [char; 4] = ['*', '_', '~', '`'];

/// How far a `<` looks for its `>` in a run (a tag's longest text read as one).
const MAX_TAG_TEXT: usize = 256;

/// A run's characters as a renderer shows them before it orders them (`full`): tags and
/// comments dropped, the text of elements not shown dropped too (raw-text elements such as
/// `<script>`, `<rp>`, and `<rt>`/`<rtc>` inside a ruby; `in_ruby`: the run starts inside
/// one), character references decoded, line breaks read as spaces — so `tiurf nedd&#105;brof`
/// and `tiurf ne<b>dd</b>ibrof` under an override are shown as `forbidden fruit`.
/// `unstyled`: the text of elements a style or an attribute may hide (a `style`, `class`, `id`
/// or `hidden` attribute) is dropped too.
fn as_rendered(run: &str, mut in_ruby: bool, unstyled: bool) -> String {
    let mut shown = String::with_capacity(run.len());
    let mut rest = run;
    // The element whose text is not shown, being skipped.
    let mut hidden: Option<String> = None;
    // Templates inside the hidden template (whose end tags it does not end at).
    let mut nested = 0usize;
    while let Some(at) = rest.find('<') {
        if hidden.is_none() {
            shown.push_str(&rest[..at]);
        }
        let after = &rest[at + 1..];
        let starts_tag =
            after.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'));
        let Some(end) = after
            .find('>')
            .filter(|&end| starts_tag && end <= MAX_TAG_TEXT)
        else {
            if hidden.is_none() {
                shown.push('<');
            }
            rest = after;
            continue;
        };
        let tag = &after[..end];
        rest = &after[end + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        let annotation = |n: &str| n == "rp" || (in_ruby && matches!(n, "rt" | "rtc"));
        hidden = match hidden {
            Some(h) if h == "template" && name == h && (!closing || nested > 0) => {
                nested = if closing { nested - 1 } else { nested + 1 };
                Some(h)
            }
            Some(h) if closing && (name == h || (name == "ruby" && annotation(&h))) => None,
            // An annotation ends where the next one starts (and that one is hidden too).
            Some(h) if !closing && annotation(&h) && annotation(&name) => Some(name.clone()),
            Some(h) => Some(h),
            None if !closing
                && (not_shown(&name)
                    || annotation(&name)
                    || (unstyled && !VOID.contains(&name.as_str()) && may_hide(tag))) =>
            {
                Some(name.clone())
            }
            None => None,
        };
        if name == "ruby" {
            in_ruby = !closing;
        }
    }
    if hidden.is_none() {
        shown.push_str(rest);
    }
    super::markup::decode_references(&shown).replace(['\n', '\r'], " ")
}

/// Whether a start tag's attributes may hide its element (`style`, `class`, `id`, `hidden`).
fn may_hide(tag: &str) -> bool {
    let tag = tag.to_ascii_lowercase();
    ["style", "class", "id", "hidden"].iter().any(|a| {
        tag.match_indices(a).any(|(i, _)| {
            let before = tag[..i].chars().next_back();
            let after = tag[i + a.len()..].chars().next();
            before.is_some_and(|c| c.is_ascii_whitespace() || c == '/')
                && after.is_none_or(|c| c == '=' || c.is_ascii_whitespace() || c == '/')
        })
    })
}

/// An isolate's opener (LRI, RLI, FSI), which only a PDI closes.
fn is_isolate(c: char) -> bool {
    matches!(c, '\u{2066}'..='\u{2068}')
}

/// The bidi formatting characters and marks, which show nothing themselves.
fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}
