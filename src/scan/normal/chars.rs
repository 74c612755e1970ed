//! What each character is to the normalised view: invisible, a space, folded, a letter of a
//! word (Latin, a look-alike of Latin, other) or not, and the Latin letter a look-alike reads as.

use std::collections::HashMap;
use std::sync::LazyLock;
use unicode_script::{Script, UnicodeScript};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Latin,
    LookAlike,
    OtherWord,
    NotWord,
}

pub(super) fn class(c: char) -> Class {
    if c.is_ascii() {
        return if c.is_ascii_alphabetic() {
            Class::Latin
        } else if c.is_ascii_alphanumeric() || c == '_' {
            Class::OtherWord
        } else {
            Class::NotWord
        };
    }
    if !crate::scan::text::is_word_char(c) {
        return Class::NotWord;
    }
    if !c.is_alphabetic() {
        return Class::OtherWord;
    }
    match c.script() {
        Script::Latin => Class::Latin,
        s if LOOK_ALIKE_SCRIPTS.contains(&s) => Class::LookAlike,
        _ => Class::OtherWord,
    }
}

/// Scripts whose letters include look-alikes of Latin letters.
pub(super) const LOOK_ALIKE_SCRIPTS: [Script; 5] = [
    Script::Cyrillic,
    Script::Greek,
    Script::Armenian,
    Script::Cherokee,
    Script::Coptic,
];

/// Blocks of the look-alike scripts (where [`LATIN_TWIN`] looks).
pub(super) const LOOK_ALIKE_BLOCKS: [(u32, u32); 17] = [
    // Latin letters beyond ASCII that render as an ASCII one (small capitals, dotless i, ...).
    (0x0100, 0x024F),
    (0x0250, 0x02AF),
    (0x1D80, 0x1DBF),
    (0x1E00, 0x1EFF),
    (0x2C60, 0x2C7F),
    (0xA720, 0xA7FF),
    (0xAB30, 0xAB6F),
    (0x0370, 0x03FF),
    (0x0400, 0x052F),
    (0x0530, 0x058F),
    (0x13A0, 0x13FF),
    (0x1C80, 0x1C8F),
    (0x1D00, 0x1D7F),
    (0x1F00, 0x1FFF),
    (0x2C80, 0x2CFF),
    (0xA640, 0xA69F),
    (0xAB70, 0xABBF),
];

/// For each look-alike letter, and each Latin letter beyond ASCII, the ASCII letter with the same
/// UTS #39 skeleton (of the same case where both cases have one).
pub(super) static LATIN_TWIN: LazyLock<HashMap<char, char>> = LazyLock::new(|| {
    let skeleton =
        |c: char| -> String { unicode_security::skeleton(c.encode_utf8(&mut [0; 4])).collect() };
    let mut by_skeleton: HashMap<String, Vec<char>> = HashMap::new();
    for b in ('a'..='z').chain('A'..='Z') {
        by_skeleton.entry(skeleton(b)).or_default().push(b);
    }
    let mut twins = HashMap::new();
    for &(from, to) in &LOOK_ALIKE_BLOCKS {
        for c in (from..=to).filter_map(char::from_u32) {
            if c.is_ascii() || !matches!(class(c), Class::LookAlike | Class::Latin) {
                continue;
            }
            let Some(latin) = by_skeleton.get(&skeleton(c)) else {
                continue;
            };
            let same_case = latin
                .iter()
                .find(|l| l.is_uppercase() == c.is_uppercase())
                .or(latin.first());
            if let Some(&l) = same_case {
                twins.insert(c, l);
            }
        }
    }
    // Small capitals have no skeleton of one ASCII letter, but every reader sees the letter
    // (the "fancy text" generators' favourite): Unicode names them LATIN LETTER SMALL CAPITAL X.
    for (c, l) in SMALL_CAPITALS {
        twins.entry(c).or_insert(l);
    }
    twins
});

/// The small capitals, by the letter Unicode's name gives them (x has none).
pub(super) const SMALL_CAPITALS: [(char, char); 25] = [
    ('\u{1D00}', 'a'),
    ('\u{0299}', 'b'),
    ('\u{1D04}', 'c'),
    ('\u{1D05}', 'd'),
    ('\u{1D07}', 'e'),
    ('\u{A730}', 'f'),
    ('\u{0262}', 'g'),
    ('\u{029C}', 'h'),
    ('\u{026A}', 'i'),
    ('\u{1D0A}', 'j'),
    ('\u{1D0B}', 'k'),
    ('\u{029F}', 'l'),
    ('\u{1D0D}', 'm'),
    ('\u{0274}', 'n'),
    ('\u{1D0F}', 'o'),
    ('\u{1D18}', 'p'),
    ('\u{A7AF}', 'q'),
    ('\u{0280}', 'r'),
    ('\u{A731}', 's'),
    ('\u{1D1B}', 't'),
    ('\u{1D1C}', 'u'),
    ('\u{1D20}', 'v'),
    ('\u{1D21}', 'w'),
    ('\u{028F}', 'y'),
    ('\u{1D22}', 'z'),
];

/// The Latin letter a look-alike letter reads as, if any.
pub(super) fn latin_twin(c: char) -> Option<char> {
    LATIN_TWIN.get(&c).copied()
}

/// Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties): characters no reader
/// renders. A unit test checks this list against `unicode-security`'s table.
pub(super) fn is_ignorable(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// The characters whose full case folding differs from what the view's decomposition and the
/// matchers' simple folding make of them (the rest of CaseFolding.txt's full foldings are
/// compatibility or canonical decompositions: ligatures, `ŉ`, `ǰ`, `ΐ`, ...).
pub(super) fn full_fold(c: char) -> Option<&'static str> {
    match c {
        '\u{DF}' | '\u{1E9E}' => Some("ss"),
        '\u{3C2}' => Some("\u{3C3}"),
        _ => None,
    }
}

/// A non-ASCII space or line separator, as the plain space (a run of them is then one space).
pub(super) fn plain_space(c: char) -> Option<char> {
    c.is_whitespace().then_some(' ')
}

/// Markdown's emphasis, strike-through and code marks, which a rendered answer does not show
/// (`for**bid**den` reads as `forbidden`); `_` stays, as it is part of names and keys.
pub(super) fn is_markup(b: u8) -> bool {
    matches!(b, b'*' | b'~' | b'`')
}

/// ASCII whitespace: a run of it (with the other spaces) reads as one space.
pub(super) fn is_ascii_space(b: u8) -> bool {
    b == b' ' || (b'\t'..=b'\r').contains(&b)
}

/// Code points a renderer draws as an empty space of a letter's width, though Unicode does not
/// call them white space: the Hangul fillers (letters, and default-ignorable, yet a font shows
/// them as a blank advance) and the blank symbols (braille pattern blank, ideographic half fill
/// space). Between words they read as the space a person sees, not as nothing (which would
/// join the words) and not as letters (which would part a phrase).
pub(super) fn is_blank(c: char) -> bool {
    matches!(
        c as u32,
        0x115F | 0x1160 | 0x3164 | 0xFFA0 | 0x2800 | 0x303F
    )
}

/// Combining marks of the blocks shared by every script (accents, overlays, enclosing marks,
/// the "Zalgo" stock: Combining Diacritical Marks and their Extended and Supplement blocks,
/// the marks for symbols, half marks, and the Cyrillic titlos and enclosing signs). Drawn over
/// a letter they leave the letter a reader reads, so the view reads the letter alone; a mark
/// of a script's own block (Arabic vowels, Hebrew points, Indic vowel signs, kana voicing)
/// is part of the letter and stays.
pub(super) fn is_shared_mark(c: char) -> bool {
    matches!(
        c as u32,
        0x0300..=0x036F
            | 0x0483..=0x0489
            | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF
            | 0x20D0..=0x20FF
            | 0xFE20..=0xFE2F
    )
}

/// Unicode tag characters that spell ASCII (U+E0020..U+E007E): invisible to a person, read by
/// a model as the ASCII they spell ("ASCII smuggling").
pub(super) fn tag_ascii(c: char) -> Option<char> {
    match c as u32 {
        u @ 0xE0020..=0xE007E => char::from_u32(u - 0xE0000),
        _ => None,
    }
}

/// The byte a variation selector carries when selectors are used as a byte channel (VS1..VS16
/// are 0..15, VS17..VS256 are 16..255: the encoding of "emoji smuggling").
pub(super) fn selector_byte(c: char) -> Option<u8> {
    match c as u32 {
        u @ 0xFE00..=0xFE0F => u8::try_from(u - 0xFE00).ok(),
        u @ 0xE0100..=0xE01EF => u8::try_from(u - 0xE0100 + 16).ok(),
        _ => None,
    }
}

/// The explicit bidirectional formatting characters (UAX #9): embeddings, overrides and their
/// end, isolates and their end. A run they open is displayed in another order than it is
/// written.
pub(super) fn is_bidi_opener(c: char) -> bool {
    matches!(c as u32, 0x202A..=0x202E | 0x2066..=0x2068) && c != '\u{202C}'
}

pub(super) fn is_bidi_closer(c: char) -> bool {
    matches!(c, '\u{202C}' | '\u{2069}')
}

/// A paragraph separator of UAX #9 (bidi class B): the end of a paragraph's reordering.
pub(super) fn is_paragraph_end(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{1C}' | '\u{1D}' | '\u{1E}' | '\u{85}' | '\u{2029}'
    )
}
