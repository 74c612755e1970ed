//! `full`: the view reads Markdown as a rendered answer shows it, for the two marks that need a
//! character of look-ahead.
//!
//! - **`_` emphasis.** A run of `_` at a word's edge (a letter or digit on exactly one side:
//!   `_forbidden_`, `__forbidden__`) is emphasis and is not shown; inside a word (`snake_case`)
//!   or between two non-words (`a _ b`) it is text, as Markdown renders it. The run waits for
//!   the character after it; invisible characters and the other marks (`*`, `~`, `` ` ``) are
//!   looked through.
//! - **Character references.** `&#102;`, `&#x66;` and the HTML5 named references (`&nbsp;`,
//!   `&shy;`, `&fopf;`) render as the character they name, in Markdown as in HTML, so they read
//!   as it and go through the rest of the view (a `&nbsp;` is a space, a `&shy;` is dropped,
//!   `&fopf;` is `f`). As in CommonMark a reference ends with `;` (numeric: 1–7 decimal or 1–6
//!   hex digits; named: a name HTML5 defines); anything else is text as written. A character a
//!   reference spells is not a mark (`&#42;` is a literal `*`) and starts no reference
//!   (`&amp;#102;` reads `&#102;`, decoded once). Invalid code points read as U+FFFD, as a
//!   browser shows them.
//!
//! Both wait at most a bounded run ([`MAX_HELD`](super::MAX_HELD) underscores, the longest
//! reference), decided by the text alone, so every split of a text gives the same view.

use super::chars::{is_bidi_closer, is_bidi_opener};
use super::{is_blank, is_ignorable, is_markup, Normalizer, Unit, MAX_HELD};
use std::collections::HashMap;
use std::sync::LazyLock;

/// HTML5's named character references: name (without `&` and `;`) to the text it names, from
/// the WHATWG table in `entities.txt`.
static NAMED: LazyLock<HashMap<&'static str, String>> = LazyLock::new(|| {
    include_str!("entities.txt")
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let name = fields.next()?;
            let text = fields
                .map(|hex| u32::from_str_radix(hex, 16).ok().and_then(char::from_u32))
                .collect::<Option<String>>()?;
            Some((name, text))
        })
        .collect()
});

/// The longest reference read: `&` and 32 name characters (HTML5's longest name is 31) or
/// `#x` and digits (leading zeros included), before the `;`.
const MAX_REFERENCE: usize = 33;

impl Normalizer {
    /// The Markdown stage for one character: `_` runs wait, the other marks are dropped, and
    /// a waiting `_` run is decided by this character. `spelled`: the character came from a
    /// reference (so it is text, never a mark).
    pub(super) fn markup_char(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        spelled: bool,
        out: &mut String,
    ) {
        // (A reference or an escape ends with punctuation as written, `;` or the escaped
        // character: a `_` run after it is not after a word to CommonMark.)
        let after_spelled = std::mem::replace(&mut self.after_spelled, spelled);
        if !spelled && c == '_' && !self.fragment {
            if self.underscores.is_empty() {
                self.underscores_after_word =
                    !after_spelled && self.base.is_some_and(char::is_alphanumeric);
                // (After punctuation — a construct's `>`, a reference's `;` — a run opens
                // emphasis before a word and closes it before anything else.)
                self.underscores_after_punctuation = after_spelled
                    || self
                        .base
                        .is_some_and(|b| b.is_ascii_punctuation() && b != '_');
            }
            self.underscores.push(Unit {
                c,
                raw,
                raw_end,
                exact: true,
            });
            if self.underscores.len() > MAX_HELD {
                self.flush_underscores(true, out);
            }
            return;
        }
        if !spelled && c.is_ascii() && is_markup(c as u8) {
            // (Emphasis needs a `*` after a character that is not white space to close it.)
            if c == '`' || (c == '*' && self.base.is_some_and(|b| !b.is_whitespace())) {
                self.markdown_tag_in_foreign_content(raw, raw_end);
            }
            self.glued_mark(raw, out);
            return;
        }
        if !self.underscores.is_empty() && (!is_ignorable(c) || is_blank(c)) {
            let keep = !self.underscores_after_punctuation
                && self.underscores_after_word == c.is_alphanumeric();
            self.flush_underscores(keep, out);
        }
        self.text_char(c, raw, raw_end, !spelled, out);
    }

    /// A Markdown mark the view drops, at raw `raw`: a boundary after a word (`join.rs`,
    /// `mark_dropped`). A `_` run waiting (it may be emphasis) is the word's end if it is
    /// text: the boundary is read once it is decided. Combining marks held for their order end
    /// with the word: written first (`بَ*forbidden` keeps the word `forbidden`).
    pub(super) fn glued_mark(&mut self, raw: u64, out: &mut String) {
        if self.underscores.is_empty() {
            self.flush_marks(out);
            self.mark_dropped(raw);
        } else {
            self.mark_after_underscores.get_or_insert(raw);
        }
    }

    /// CommonMark decides a `_` run by the characters as written: after a word, the `&` of a
    /// reference or the `<` of a tag is punctuation that lets the run close emphasis, whatever
    /// it turns out to show (before a word, the run waits for the text shown next).
    pub(super) fn underscores_before_punctuation(&mut self, out: &mut String) {
        if !self.underscores.is_empty() && self.underscores_after_word {
            self.flush_underscores(false, out);
        }
    }

    /// Writes the waiting `_` run as text (`keep`) or drops it as emphasis.
    fn flush_underscores(&mut self, keep: bool, out: &mut String) {
        let mut run = std::mem::take(&mut self.underscores);
        if let (false, Some(first), Some(last)) = (keep, run.first(), run.last()) {
            let (raw, raw_end) = (first.raw, last.raw_end);
            self.markdown_tag_in_foreign_content(raw, raw_end);
        }
        if keep {
            for &u in &run {
                self.text_char(u.c, u.raw, u.raw_end, true, out);
            }
        }
        run.clear();
        self.underscores = run;
        // A mark dropped while the run waited: a boundary after it (`x_*forbidden`).
        if let Some(raw) = self.mark_after_underscores.take() {
            self.glued_mark(raw, out);
        }
    }

    /// The reference stage for one character: true when it was taken (it starts or continues
    /// a reference, or ends one with `;`). A character that cannot continue the reference
    /// read so far writes that text as it is and is then handled on its own.
    pub(super) fn reference_char(
        &mut self,
        c: char,
        raw: u64,
        raw_end: u64,
        out: &mut String,
    ) -> bool {
        if !self.reference.is_empty() {
            if c == ';' {
                if let Some(spelled) = self.resolve_reference() {
                    let start = self.reference[0].raw;
                    self.reference.clear();
                    self.spelled_text(&spelled, start, raw_end, out);
                    return true;
                }
            } else if self.continues_reference(c) {
                self.reference.push(Unit {
                    c,
                    raw,
                    raw_end,
                    exact: true,
                });
                return true;
            }
            self.flush_reference(out);
        }
        if c == '&' {
            self.underscores_before_punctuation(out);
            self.reference.push(Unit {
                c,
                raw,
                raw_end,
                exact: true,
            });
            return true;
        }
        false
    }

    /// Whether `c` may come next in the reference read so far (`&`, then `#` and digits, `#x`
    /// and hex digits, or a name), within [`MAX_REFERENCE`].
    fn continues_reference(&self, c: char) -> bool {
        if self.reference.len() >= MAX_REFERENCE || !c.is_ascii_alphanumeric() && c != '#' {
            return false;
        }
        let body: Vec<char> = self.reference[1..].iter().map(|u| u.c).collect();
        match body.as_slice() {
            [] => true,
            ['#'] => c.is_ascii_digit() || c == 'x' || c == 'X',
            // Digits as a browser reads them: any number (up to the bound); past U+10FFFF
            // the reference names U+FFFD.
            ['#', 'x' | 'X', ..] => c.is_ascii_hexdigit(),
            ['#', ..] => c.is_ascii_digit(),
            name => c.is_ascii_alphanumeric() && name.first() != Some(&'#'),
        }
    }

    /// The text the reference read so far names, when `;` ends it here.
    fn resolve_reference(&self) -> Option<String> {
        let body: String = self.reference[1..].iter().map(|u| u.c).collect();
        resolve(&body)
    }
}

/// `text` with its character references (as the reference stage reads them) replaced by
/// what they name: the text of a tag Markdown shows as written (`join.rs`), a bidi run.
pub(super) fn decode_references(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let body_len = rest[1..]
            .char_indices()
            .take(MAX_REFERENCE)
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '#'))
            .map_or(rest.len() - 1, |(i, _)| i);
        let body = &rest[1..1 + body_len];
        let terminated = rest[1 + body_len..].starts_with(';');
        let decoded = match terminated {
            true => resolve(body).map(|t| (t, body_len + 1)),
            false => None,
        }
        .or_else(|| resolve_unterminated(body));
        match decoded {
            Some((named, taken)) => {
                out.push_str(&named);
                rest = &rest[1 + taken..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The names a browser decodes in text without their `;` (WHATWG's legacy ones).
const LEGACY: [&str; 106] = [
    "AElig", "AMP", "Aacute", "Acirc", "Agrave", "Aring", "Atilde", "Auml", "COPY", "Ccedil",
    "ETH", "Eacute", "Ecirc", "Egrave", "Euml", "GT", "Iacute", "Icirc", "Igrave", "Iuml", "LT",
    "Ntilde", "Oacute", "Ocirc", "Ograve", "Oslash", "Otilde", "Ouml", "QUOT", "REG", "THORN",
    "Uacute", "Ucirc", "Ugrave", "Uuml", "Yacute", "aacute", "acirc", "acute", "aelig", "agrave",
    "amp", "aring", "atilde", "auml", "brvbar", "ccedil", "cedil", "cent", "copy", "curren", "deg",
    "divide", "eacute", "ecirc", "egrave", "eth", "euml", "frac12", "frac14", "frac34", "gt",
    "iacute", "icirc", "iexcl", "igrave", "iquest", "iuml", "laquo", "lt", "macr", "micro",
    "middot", "nbsp", "not", "ntilde", "oacute", "ocirc", "ograve", "ordf", "ordm", "oslash",
    "otilde", "ouml", "para", "plusmn", "pound", "quot", "raquo", "reg", "sect", "shy", "sup1",
    "sup2", "sup3", "szlig", "thorn", "times", "uacute", "ucirc", "ugrave", "uml", "uuml",
    "yacute", "yen", "yuml",
];

/// What a reference's body names when it ends without `;`, as a browser reads text: a
/// numeric one whole (`&#100den` reads `dden`), else the longest legacy name it starts with
/// (`&notit` reads `¬it`). The text, and how many of the body's characters it took.
fn resolve_unterminated(body: &str) -> Option<(String, usize)> {
    if let Some(number) = body.strip_prefix('#') {
        let digits = number.trim_start_matches(['x', 'X']);
        if digits.is_empty() {
            return None;
        }
        return resolve(body).map(|t| (t, body.len()));
    }
    (1..=body.len()).rev().find_map(|n| {
        let name = body.get(..n)?;
        if !LEGACY.contains(&name) {
            return None;
        }
        NAMED.get(name).map(|t| (t.clone(), n))
    })
}

/// What a numeric reference to U+0080–U+009F names (WHATWG HTML, "numeric character
/// reference end state"): the Windows-1252 character, or the control where it has none.
const WINDOWS_1252_C1: [char; 32] = [
    '\u{20AC}', '\u{81}', '\u{201A}', '\u{192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{2C6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8D}', '\u{17D}', '\u{8F}',
    '\u{90}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{2DC}', '\u{2122}', '\u{161}', '\u{203A}', '\u{153}', '\u{9D}', '\u{17E}', '\u{178}',
];

/// What a reference's body (between `&` and `;`) names.
fn resolve(body: &str) -> Option<String> {
    let number = |digits: &str, radix: u32| -> Option<String> {
        if digits.is_empty() {
            return None;
        }
        if !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        // Too large for a u32 is past U+10FFFF too.
        let code = u32::from_str_radix(digits, radix).unwrap_or(u32::MAX);
        let c = match code {
            0 => char::REPLACEMENT_CHARACTER,
            // A C1 control's number names the Windows-1252 character there, as browsers
            // and CommonMark's renderers read it (`&#x85;` is `…`).
            0x80..=0x9F => WINDOWS_1252_C1[(code - 0x80) as usize],
            _ => char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
        };
        Some(c.to_string())
    };
    if let Some(hex) = body.strip_prefix("#x").or_else(|| body.strip_prefix("#X")) {
        return number(hex, 16);
    }
    if let Some(decimal) = body.strip_prefix('#') {
        return number(decimal, 10);
    }
    NAMED.get(body).cloned()
}

impl Normalizer {
    /// The reference read so far ends without its `;`: what a browser still decodes of it
    /// (a numeric reference, the longest legacy name: [`resolve_unterminated`]) is spelled,
    /// the rest is text as written.
    pub(super) fn flush_reference(&mut self, out: &mut String) {
        let mut read = std::mem::take(&mut self.reference);
        let body: String = read.iter().skip(1).map(|u| u.c).collect();
        let mut text_from = 0;
        if let Some((spelled, taken)) = resolve_unterminated(&body) {
            self.spelled_text(&spelled, read[0].raw, read[taken].raw_end, out);
            text_from = 1 + taken;
        }
        for &u in &read[text_from..] {
            self.markup_char(u.c, u.raw, u.raw_end, false, out);
        }
        read.clear();
        self.reference = read;
    }

    /// What a reference at raw `start..raw_end` spells: text (never markup); a bidi control
    /// orders what a renderer shows as a written one does.
    fn spelled_text(&mut self, spelled: &str, start: u64, raw_end: u64, out: &mut String) {
        for d in spelled.chars() {
            if is_bidi_opener(d) {
                self.bidi_open_spelled(d, raw_end);
            } else if is_bidi_closer(d) {
                self.bidi_close_spelled(&[d], start);
            }
            self.markup_char(d, start, raw_end, true, out);
        }
    }

    /// The end of the text: a reference without its `;` is read as a browser reads it (above), a waiting `_` run closes
    /// emphasis after a word (and is text otherwise).
    pub(super) fn finish_markup(&mut self, out: &mut String) {
        self.flush_line_mark(out);
        self.flush_reference(out);
        if !self.underscores.is_empty() {
            let keep = !self.underscores_after_word && !self.underscores_after_punctuation;
            self.flush_underscores(keep, out);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_named_references_are_whatwgs() {
        let named = &*super::NAMED;
        assert_eq!(named.len(), 2125);
        assert_eq!(named["nbsp"], "\u{a0}");
        assert_eq!(named["fopf"], "\u{1d557}");
        assert_eq!(named["NotEqualTilde"], "\u{2242}\u{338}");
        assert!(named.keys().all(|k| k.len() < super::MAX_REFERENCE));
    }
}
