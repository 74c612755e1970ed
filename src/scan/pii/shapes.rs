//! What each kind of personal data looks like: the kinds ([`PiiKind`]), the loose *shapes* the
//! matcher's DFAs are built from ([`shapes`], one [`Form`] each, which says how its candidates
//! are validated and how far back they can start), and the exact forms of API keys
//! ([`KEY_EXACT`]). Only patterns and their properties: the matcher that runs them is
//! [`super::PiiMatcher`], the checksum and range checks are in [`super::valid`].

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Look};

/// Longest candidate, in bytes, that is looked at whole (longer ones are cut to their end).
pub const MAX_SPAN: usize = 256;

/// A kind of personal data or secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PiiKind {
    Email,
    Phone,
    CreditCard,
    Iban,
    Ssn,
    Ipv4,
    Ipv6,
    ApiKey,
}

impl PiiKind {
    pub const ALL: [PiiKind; 8] = [
        PiiKind::Email,
        PiiKind::Phone,
        PiiKind::CreditCard,
        PiiKind::Iban,
        PiiKind::Ssn,
        PiiKind::Ipv4,
        PiiKind::Ipv6,
        PiiKind::ApiKey,
    ];

    /// The name used in packs and in `[REDACTED:<name>]`.
    pub fn name(self) -> &'static str {
        match self {
            PiiKind::Email => "email",
            PiiKind::Phone => "phone",
            PiiKind::CreditCard => "credit_card",
            PiiKind::Iban => "iban",
            PiiKind::Ssn => "ssn",
            PiiKind::Ipv4 => "ipv4",
            PiiKind::Ipv6 => "ipv6",
            PiiKind::ApiKey => "api_key",
        }
    }

    /// A kind by its [`name`](Self::name) (case and `-`/`_` insensitive).
    pub fn parse(s: &str) -> Option<PiiKind> {
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        PiiKind::ALL.into_iter().find(|k| k.name() == norm)
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// Kinds whose match is a whole run (an address inside a longer run is none).
    pub(super) fn maximal(self) -> bool {
        matches!(self, PiiKind::Ipv4 | PiiKind::Ipv6)
    }
}

/// How a shape's candidates are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    Email,
    /// `(415) 555-0132`, `+1 415 555 0132`, …
    Nanp,
    /// `+CC` then digit groups.
    Intl,
    Card,
    Iban,
    Ssn,
    Ipv4,
    Ipv6,
    /// A prefixed token, ended by a byte outside `[A-Za-z0-9_-]`; checked by [`KEY_EXACT`].
    Token,
    /// `-----BEGIN … PRIVATE KEY-----`: the shape is exact.
    Pem,
}

impl Form {
    /// Longest candidate worth validating, in bytes: bounds the reverse run after an end of this
    /// form, so that digit-heavy text costs little even where candidates end at every group.
    pub(super) fn max_span(self) -> usize {
        match self {
            Form::Email | Form::Token | Form::Pem => MAX_SPAN,
            // One byte more than the longest address: a longer run is seen to go on.
            Form::Ipv4 => 16,
            Form::Ipv6 => 40,
            Form::Nanp => 18, // +1 (415) 555-0132
            Form::Intl => 31, // + 15 digits, 14 separators
            Form::Card => 23, // 19 digits in 5 groups
            Form::Iban => 42, // 34 characters in groups of 4
            Form::Ssn => 11,
        }
    }

    /// Whether only the longest candidate counts: an address is a whole run, and an e-mail's
    /// shape is exact, so a shorter one of the same end is valid only if the longest is.
    pub(super) fn longest_only(self) -> bool {
        matches!(self, Form::Email | Form::Ipv4 | Form::Ipv6 | Form::Ssn)
    }

    pub(super) fn kind(self) -> PiiKind {
        match self {
            Form::Email => PiiKind::Email,
            Form::Nanp | Form::Intl => PiiKind::Phone,
            Form::Card => PiiKind::CreditCard,
            Form::Iban => PiiKind::Iban,
            Form::Ssn => PiiKind::Ssn,
            Form::Ipv4 => PiiKind::Ipv4,
            Form::Ipv6 => PiiKind::Ipv6,
            Form::Token | Form::Pem => PiiKind::ApiKey,
        }
    }
}

/// A token candidate ends at the first byte outside the token alphabet `[A-Za-z0-9_-]`, or at
/// the end of the text. A byte class, not a Unicode one: `[^…]` over all of Unicode would add
/// UTF-8 decoding states that multiply with every other shape's.
pub(super) fn token_end() -> Hir {
    let ranges = [
        (0x00, b'-' - 1),
        (b'-' + 1, b'0' - 1),
        (b'9' + 1, b'A' - 1),
        (b'Z' + 1, b'_' - 1),
        (b'_' + 1, b'a' - 1),
        (b'z' + 1, 0xFF),
    ]
    .map(|(a, b)| ClassBytesRange::new(a, b));
    Hir::alternation(vec![
        Hir::class(Class::Bytes(ClassBytes::new(ranges))),
        Hir::look(Look::End),
    ])
}

/// The shapes, in guardwire's regex dialect (ASCII `\d` and `\b`).
pub(super) fn shapes() -> Vec<(Form, String)> {
    vec![
        (
            Form::Email,
            concat!(
                r"[A-Za-z0-9_%+-]+(?:\.[A-Za-z0-9_%+-]+)*",
                r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}\b"
            )
            .into(),
        ),
        (
            Form::Nanp,
            r"(?:\+1[ .-]?|\b1[ .-])?(?:\(\d{3}\)[ .-]?|\b\d{3}[ .-])\d{3}[ .-]\d{4}\b".into(),
        ),
        (Form::Intl, r"\+[1-9]\d*(?:[ .-]\d+)*\b".into()),
        (Form::Card, r"\b\d{4}(?:[ -]?\d+)+\b".into()),
        (Form::Iban, r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]+)+\b".into()),
        (Form::Ssn, r"\b\d{3}-\d{2}-\d{4}\b".into()),
        (Form::Ipv4, r"\b\d+(?:\.\d+)+\b".into()),
        (
            Form::Ipv6,
            r"(?:\b[0-9A-Fa-f]+|:):[0-9A-Fa-f:]*[0-9A-Fa-f]\b".into(),
        ),
        (
            Form::Token,
            r"\b(?:sk-|AKIA|gh[pousr]_|github_pat_|xox[baprs]-|AIza|[sr]k_live_)[A-Za-z0-9_-]+"
                .into(),
        ),
        (
            Form::Pem,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----".into(),
        ),
    ]
}

/// The exact forms of prefixed API keys (the whole token must match).
pub(super) const KEY_EXACT: &str = concat!(
    r"^(?:",
    r"sk-[A-Za-z0-9_-]{20,}", // OpenAI (incl. sk-proj-), Anthropic sk-ant-
    r"|AKIA[0-9A-Z]{16}",     // AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{36,}", // GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{22,}", // GitHub fine-grained tokens
    r"|xox[baprs]-[A-Za-z0-9-]{10,}", // Slack
    r"|AIza[0-9A-Za-z_-]{35}", // Google API key
    r"|[sr]k_live_[0-9A-Za-z]{24,}", // Stripe live secret / restricted key
    r")$"
);

pub(super) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}
