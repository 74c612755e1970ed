//! The shape of an identifier: the one rule by which a string a protocol carries as structure
//! (an id, a cursor, a progress token, a media type, a version) is exempt from the text checks
//! that read words and phrases. It is the rule the LLM decoders' fallback applies to the
//! literals under structural keys (`residual::structure_shaped`: printable ASCII, no space,
//! no escape), on decoded text and with a length cap: a word, a phrase or an escape is text
//! to a reader wherever it stands, and so is a value too long to be an opaque token.
//!
//! An identifier is exempt from words, phrases and lengths only: the secret and PII patterns
//! still read it (`ExchangeGuard::check_identifiers`), since an id can carry a key as well as
//! any text can.

/// The longest identifier (an opaque cursor or id); a longer value is text.
pub const MAX_IDENTIFIER: usize = 1024;

/// True when `s` has the shape of an identifier: 1 to [`MAX_IDENTIFIER`] bytes of printable
/// ASCII without space or backslash.
pub fn is_identifier(s: &str) -> bool {
    (1..=MAX_IDENTIFIER).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_spaces_escapes_and_long_values_are_text() {
        for id in [
            "tok-1",
            "image/png",
            "2025-11-25",
            "c3VyZQ==",
            "endTurn",
            "a",
        ] {
            assert!(is_identifier(id), "{id}");
        }
        let long = "x".repeat(MAX_IDENTIFIER + 1);
        for text in [
            "",
            "two words",
            "tab\there",
            "back\\slash",
            "caf\u{e9}",
            &long,
        ] {
            assert!(!is_identifier(text), "{text}");
        }
        assert!(is_identifier(&long[1..]));
    }
}
