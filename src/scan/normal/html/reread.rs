//! Comments and bogus comments (`<!--`, `<?`, `<!x`, `<![CDATA[`) CommonMark does not read as
//! one: a browser hides them up to their end (`-->`, `>`), but CommonMark reads one in a
//! paragraph only when it ends in that paragraph. Cut by a blank line (or never ended), it is
//! text to a Markdown renderer, and what follows its opener is read as Markdown and HTML again:
//! its tags are tags (`a <!--forbid<b hidden>x</b>den fruit` shows `a <!--forbidden fruit`),
//! and after the blank line (or a line that starts a block: `# `, `> `, `- x`, `<div>`, a
//! fence, a rule) a new block starts, whose first `>` ends the browser's bogus
//! comment (`a <![CDATA[`, a blank line, `forbidden<b> fruit` shows `forbidden fruit`). So
//! is one that ends as a browser's but not as CommonMark's (`<![CDATA[x>` without `]]>`, `<?x>`
//! without `?>`, `<!-x>`): read again, on to the end of its paragraph.
//!
//! The view hides such a construct (the browser's reading). Its text is kept from its opener
//! on — held back, up to [`MAX_REREAD`] characters; past that it is refused once cut — and
//! when a blank line cut it (read on to the end of the line where it then ends) or the text
//! ends inside it, that text is read again as a text of its own by a view of its own: that
//! view is an aside. (A construct at a line's start is an HTML block to CommonMark, passed
//! whole; it is read again all the same: a reading no reader has only adds matches.)

use super::super::{Normalize, Normalizer};
use super::{Literal, Markup};

/// Characters of a construct kept to read again.
const MAX_REREAD: usize = 2048;

/// Views deep a cut construct is read again (the text's own view is the first).
const MAX_REREAD_DEPTH: u8 = 4;

/// A construct being read that a blank line may cut.
#[derive(Debug, Default, Clone)]
pub(in crate::scan::normal) struct Reread {
    /// Its text after the opener, as written (a spelled `<` or `&` spelled again).
    text: String,
    /// Where it starts (its `<`), and where the last character read ends.
    raw: u64,
    raw_end: u64,
    /// A blank line passed inside it.
    cut: bool,
    /// It ended after a cut: read on to the end of the line.
    ended: bool,
    /// The line read so far is white space.
    line_blank: bool,
    /// The last character was a CR (a LF after it ends no other line).
    after_cr: bool,
    /// The start of the line being read, while it may still start a block that ends a
    /// paragraph ([`starts_block`]); `None` once decided.
    lead: Option<String>,
    /// More than [`MAX_REREAD`] characters: not kept.
    past_bound: bool,
    /// It starts inside an `<svg>`, a `<math>`, a table or a `<select>`, where the parser
    /// reads tags otherwise than a view of its own would: cut, it is refused.
    in_context: bool,
    /// The bidi controls open where it starts (a `<bdo>`'s, a style's override, written
    /// ones): its text is read under them.
    controls: String,
    /// How it opened (`<!--`, `<?`, `<![`, `<!x`, …), its first characters and its last ones
    /// (kept past the bound): whether CommonMark reads it as a construct.
    opener: String,
    head: String,
    tail: String,
}

/// Whether CommonMark reads a construct that opened with `opener` and holds `head` … `tail`
/// (its end included) as one: a comment ending `-->`, a processing instruction ending `?>`, a
/// CDATA section ending `]]>`, a declaration (`<!` and a letter). Another (`<!-x>`, `</1>`, a
/// comment a browser ends at `--!>`) is text to it.
fn commonmark_reads(opener: &str, head: &str, tail: &str) -> bool {
    match opener {
        "<!--" => tail.ends_with("-->") || head == ">" || head == "->",
        "<?" => tail.ends_with("?>"),
        "<![" => head.starts_with("CDATA[") && tail.ends_with("]]>"),
        o => o.len() == 3 && o.starts_with("<!") && o.as_bytes()[2].is_ascii_alphabetic(),
    }
}

/// CommonMark's HTML block tags (its start condition 6): `<div`, `</table` … at a line's
/// start open an HTML block, which may end a paragraph.
#[rustfmt::skip]
const COMMONMARK_BLOCK_TAGS: [&str; 62] = [
    "address", "article", "aside", "base", "basefont", "blockquote", "body", "caption",
    "center", "col", "colgroup", "dd", "details", "dialog", "dir", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3",
    "h4", "h5", "h6", "head", "header", "hr", "html", "iframe", "legend", "li", "link", "main",
    "menu", "menuitem", "nav", "noframes", "ol", "optgroup", "option", "p", "param", "search",
    "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr",
    "track", "ul",
];

/// The longest line start [`starts_block`] reads before deciding.
const MAX_LEAD: usize = 16;

/// Whether a line starting with `lead` (the whole line when `ended`) starts a block that ends
/// a paragraph, as CommonMark reads it: an ATX heading, a block quote, a list item that is not
/// empty (an ordered one numbered 1), a thematic break or a setext underline, a code fence, an
/// HTML block of kinds 1 to 6. `None`: not known yet.
fn starts_block(lead: &str, ended: bool) -> Option<bool> {
    let blank = |c: char| c == ' ' || c == '\t';
    // (Any indentation: inside a list item or a quote four spaces may still be a block's
    // start; a block read where there is none only adds a reading.)
    let line = lead.trim_start_matches(blank);
    // Not known yet, unless the line ended (then `no`), or it is too long to wait for.
    let undecided = |no: bool| match ended || lead.len() >= MAX_LEAD {
        true => Some(no),
        false => None,
    };
    let mut chars = line.chars();
    let Some(first) = chars.next() else {
        return undecided(false);
    };
    let rest = chars.as_str();
    // A list item's mark is followed by white space, then something (an empty item does not
    // end a paragraph).
    let item = |after: &str| match after.chars().next() {
        Some(c) if blank(c) => match after.trim_start_matches(blank) {
            "" => undecided(false),
            _ => Some(true),
        },
        Some(_) => Some(false),
        None => undecided(false),
    };
    match first {
        '>' => Some(true),
        '#' => {
            let after = rest.trim_start_matches('#');
            if rest.len() - after.len() >= 6 {
                return Some(false);
            }
            match after.chars().next() {
                Some(c) => Some(blank(c)),
                None => undecided(true),
            }
        }
        '`' | '~' => {
            let run = line.len() - line.trim_start_matches(first).len();
            match run >= 3 {
                true => Some(true),
                false if run == line.len() => undecided(false),
                false => Some(false),
            }
        }
        '-' | '*' | '_' | '=' | '+' => {
            if matches!(first, '-' | '*' | '+') && item(rest) == Some(true) {
                return Some(true);
            }
            // A rule (three or more of `-`, `*`, `_`, white space between) or an underline
            // (`=`s or `-`s, white space after): known at the line's end.
            let only = line.chars().all(|c| c == first || blank(c));
            let run = line.chars().filter(|c| *c == first).count();
            let rule = matches!(first, '-' | '*' | '_') && run >= 3;
            let underline =
                matches!(first, '=' | '-') && !line.trim_end_matches(blank).contains(blank);
            match only && (rule || underline || !ended) {
                true => undecided(rule || underline),
                false => item(rest)
                    .filter(|_| matches!(first, '-' | '*' | '+'))
                    .or(Some(false)),
            }
        }
        // An ordered item numbered 1 (`1.`, `01)`: up to nine digits).
        '0'..='9' => {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let number = &line[..digits];
            let one = number.trim_start_matches('0') == "1";
            match line[digits..].chars().next() {
                _ if digits > 9 || !number.chars().all(|c| c == '0' || c == '1') => Some(false),
                Some('.' | ')') if one => item(&line[digits + 1..]),
                Some(_) => Some(false),
                None => undecided(false),
            }
        }
        '<' => {
            let lower = rest.to_ascii_lowercase();
            let declaration = lower
                .strip_prefix('!')
                .is_some_and(|d| d.starts_with(|c: char| c.is_ascii_alphabetic()));
            if declaration
                || ["!--", "?", "![cdata["]
                    .iter()
                    .any(|o| lower.starts_with(o))
            {
                return Some(true);
            }
            if ["!--", "![cdata["]
                .iter()
                .any(|o| o.starts_with(lower.as_str()))
            {
                return undecided(false);
            }
            let closing = lower.starts_with('/');
            let named = &lower[usize::from(closing)..];
            let name_end = named
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(named.len());
            let name = &named[..name_end];
            let block = COMMONMARK_BLOCK_TAGS.contains(&name)
                || (!closing && ["script", "pre", "style", "textarea"].contains(&name));
            // (After the name, white space as JavaScript's `\s` reads it: commonmark.js.)
            match named[name_end..].chars().next() {
                Some(c) => {
                    Some(block && (c.is_whitespace() || matches!(c, '>' | '/' | '\u{feff}')))
                }
                None => undecided(block),
            }
        }
        _ => Some(false),
    }
}

impl Reread {
    pub(in crate::scan::normal) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Reread>() + self.text.capacity()
    }

    /// Where its held text starts.
    pub(in crate::scan::normal) fn held_from(&self) -> Option<u64> {
        (!self.past_bound).then_some(self.raw)
    }
}

impl Normalizer {
    /// A character of the text, before the markup reads it: kept while a comment (or bogus
    /// comment) is open, and after it ends when a blank line cut it.
    #[inline]
    pub(super) fn reread_char(&mut self, c: char, raw_end: u64, spelled: bool, out: &mut String) {
        let open = matches!(
            self.markup,
            Markup::Comment { .. } | Markup::Bogus | Markup::Literal(Literal::Cdata)
        );
        if self.reread.is_none() {
            if !open {
                return;
            }
            // (`<![` waits for `CDATA[` in foreign content: read past it.)
            let cdata = self.tag_raw.starts_with("<![");
            let opener: String = match cdata {
                true => "<![".into(),
                false => self.tag_raw.chars().take(4).collect(),
            };
            // What the opener read past `<!` (`<!-x`, `<!x`, `<![CDATA[`) is the construct's
            // text to CommonMark.
            let text = match opener.as_str() {
                "<!--" => String::new(),
                _ if cdata => self.tag_raw[2..].to_owned(),
                o => o.chars().skip(2).collect(),
            };
            let head = match cdata {
                true => self.tag_raw[3..].chars().take(6).collect(),
                false => String::new(),
            };
            self.reread = Some(Box::new(Reread {
                raw: self.tag_raw_at,
                opener,
                text,
                head,
                controls: self.bidi_controls_open(),
                in_context: self
                    .open_elements
                    .iter()
                    .any(|e| e.foreign() || e.is("table") || e.is("select")),
                ..Reread::default()
            }));
        }
        let Some(r) = self.reread.as_deref_mut() else {
            return;
        };
        if !open && !r.ended {
            if !r.cut && commonmark_reads(&r.opener, &r.head, &r.tail) {
                // Ended in its paragraph: CommonMark reads it as the browser does.
                self.reread = None;
                return;
            }
            r.cut = true;
            r.ended = true;
        }
        // After it ended, read on to the end of the paragraph (a blank line, or a line that
        // starts a block: not read), or the bound.
        let line_end = c == '\r' || (c == '\n' && !r.after_cr);
        if r.ended && ((line_end && r.line_blank) || c == '\u{2029}' || r.text.len() >= MAX_REREAD)
        {
            self.reread_written(out);
            return;
        }
        // (A lone CR ends a line too, as CommonMark reads it; CR LF is one end.)
        let after_cr = std::mem::replace(&mut r.after_cr, c == '\r');
        if c == '\n' && after_cr {
            // The LF of a CR LF: the line ended at the CR.
        } else if line_end || c == '\u{2029}' {
            r.cut |= r.line_blank || c == '\u{2029}';
            r.line_blank = true;
            // A line that starts a block ends the paragraph too (`# `, `> `, `- x`, `<div>`).
            if let Some(lead) = r.lead.replace(String::new()) {
                if starts_block(&lead, true) == Some(true) {
                    r.cut = true;
                    if r.ended {
                        r.text.truncate(r.text.len().saturating_sub(lead.len()));
                        self.reread_written(out);
                        return;
                    }
                }
            }
        } else {
            if !c.is_whitespace() {
                r.line_blank = false;
            }
            if let Some(lead) = r.lead.as_mut() {
                lead.push(c);
                if let Some(block) = starts_block(lead, false) {
                    let read = lead.len() - c.len_utf8();
                    r.cut |= block;
                    r.lead = None;
                    if block && r.ended {
                        r.text.truncate(r.text.len().saturating_sub(read));
                        self.reread_written(out);
                        return;
                    }
                }
            }
        }
        r.raw_end = raw_end;
        if r.head.len() < 6 {
            r.head.push(c);
        }
        if r.tail.len() >= 8 {
            r.tail.remove(0);
        }
        r.tail.push(c);
        if r.past_bound {
            return;
        }
        match c {
            '<' if spelled => r.text.push_str("&lt;"),
            '&' if spelled => r.text.push_str("&amp;"),
            c => r.text.push(c),
        }
        if r.text.len() > MAX_REREAD {
            r.past_bound = true;
            r.text = String::new();
        }
    }

    /// The text ends: a construct still open is text to CommonMark, read again (as one a
    /// blank line cut).
    pub(super) fn reread_at_end(&mut self, out: &mut String) {
        if let Some(r) = self.reread.as_deref_mut() {
            r.cut = true;
            self.reread_written(out);
        }
    }

    /// The construct's text read again by a view of its own, written as an aside (refused when
    /// it was too long to keep, or its own view refuses it).
    fn reread_written(&mut self, out: &mut String) {
        let Some(r) = self.reread.take() else {
            return;
        };
        if !r.cut {
            return;
        }
        if r.past_bound {
            self.refuse(r.raw, r.raw_end);
            return;
        }
        // A construct cut inside a text read again is read again in turn, a few views deep
        // (each text shorter than the one it is in); deeper, it is refused.
        if self.reread_depth + 1 >= MAX_REREAD_DEPTH || r.in_context {
            self.refuse(r.raw, r.raw_end);
            return;
        }
        // Its view reads under what the text's view knew there: the style sheets' rules, the
        // bidi controls open.
        let mut view = Normalizer::new(Normalize::Full);
        view.reread_depth = self.reread_depth + 1;
        view.sheet = self.sheet.as_deref().and_then(super::StyleSheet::rules);
        let mut text = view.feed(&r.controls).into_owned();
        text.push_str(&view.feed(&r.text));
        text.push_str(&view.finish());
        if view.take_refusal().is_some() {
            self.refuse(r.raw, r.raw_end);
        }
        if text.chars().any(char::is_alphanumeric) {
            self.aside(&text, r.raw, r.raw_end, out);
        }
    }
}
