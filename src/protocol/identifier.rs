//! The shape of an identifier: what a value must look like to skip the text checks, whatever
//! field it is in. A field the protocol calls structure (an id, a kind, a media type, a model
//! name, a cursor) may still carry text — a client or an agent puts there whatever it likes —
//! so position alone exempts nothing: a value skips the word, phrase and length checks only
//! when it has the shape of an identifier ([`is_identifier`]), and even then the secret and
//! PII patterns run over it (a key or an address is identifier-shaped). The checks read such
//! values as a message of role [`Role::Identifiers`] in a request, and through
//! [`crate::policy::ExchangeGuard::check_identifier`] in an answer.
//!
//! The shape: 1 to [`MAX_IDENTIFIER`] bytes of visible ASCII, with no space and no backslash
//! (in a JSON literal: no escape, which could spell any character). Words joined by `-` or `_`
//! have it; a phrase, a sentence or any non-ASCII letter has not.

use crate::delta::{Message, Role};

/// The longest identifier; a longer value is text.
pub const MAX_IDENTIFIER: usize = 1024;

/// True when `value` has the shape of an identifier.
pub fn is_identifier(value: &str) -> bool {
    bytes_are_identifier(value.as_bytes())
}

/// The same for a JSON string literal, quotes included (an escape makes it text).
pub fn literal_is_identifier(literal: &[u8]) -> bool {
    let inner = literal
        .get(1..literal.len().saturating_sub(1))
        .unwrap_or_default();
    bytes_are_identifier(inner)
}

fn bytes_are_identifier(b: &[u8]) -> bool {
    (1..=MAX_IDENTIFIER).contains(&b.len()) && b.iter().all(|&c| c.is_ascii_graphic() && c != b'\\')
}

/// The message that carries a request's identifier-shaped values to the input checks (only the
/// secret and PII patterns read it). `None` when there are none.
pub fn message(values: Vec<String>) -> Option<Message> {
    (!values.is_empty()).then(|| Message::text(Role::Identifiers, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_kinds_and_media_types_are_identifiers() {
        for id in [
            "ctx-1",
            "0b7e6f2c-8d9a-4c1e-9f00-1234567890ab",
            "text/plain",
            "TASK_STATE_COMPLETED",
            "gpt-4o-2024-08-06",
            "sk-proj-abcdefABCDEF0123456789",
            "a@b.example",
        ] {
            assert!(is_identifier(id), "{id}");
        }
        for text in [
            "",
            "forbidden fruit",
            "ctx\t1",
            "caf\u{e9}",
            "a\\u0020b",
            &"x".repeat(MAX_IDENTIFIER + 1),
        ] {
            assert!(!is_identifier(text), "{text:?}");
        }
        assert!(literal_is_identifier(br#""ctx-1""#));
        assert!(!literal_is_identifier(br#""ctx\u00201""#));
        assert!(!literal_is_identifier(br#""""#));
    }

    proptest! {
        /// Any space or non-ASCII character makes a value text, wherever it is.
        #[test]
        fn a_space_or_a_letter_outside_ascii_is_text(
            head in "[a-z0-9_-]{0,20}",
            odd in prop_oneof![Just(' '), Just('\u{a0}'), Just('\u{200b}'), Just('é'), Just('\n')],
            tail in "[a-z0-9_-]{0,20}",
        ) {
            let value = format!("{head}{odd}{tail}");
            prop_assert!(!is_identifier(&value));
        }
    }
}
