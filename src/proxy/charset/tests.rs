#![allow(clippy::unwrap_used)]
use super::*;
use encoding_rs::{
    BIG5, EUC_JP, EUC_KR, GB18030, GBK, ISO_2022_JP, KOI8_R, SHIFT_JIS, UTF_16BE, UTF_16LE,
    WINDOWS_1251, WINDOWS_1252,
};
use proptest::prelude::*;

fn head(values: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for v in values {
        h.append(header::CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
    }
    h
}

/// The encoding and the Content-Type sent on, or the refusal.
fn read(values: &[&str]) -> Result<(&'static str, Option<String>), String> {
    declared(&head(values))
        .map(|d| {
            let ct = d.content_type.map(|v| v.to_str().unwrap().to_owned());
            (d.encoding.name(), ct)
        })
        .map_err(|Unreadable(why)| why)
}

#[test]
fn plain_utf8_heads_go_on_as_they_came() {
    assert_eq!(read(&[]), Ok(("UTF-8", None)));
    for ct in [
        "application/json",
        "text/event-stream",
        "Application/JSON; charset=UTF-8",
        "application/json;charset=\"utf-8\"",
        "text/event-stream ; charset = utf-8",
    ] {
        assert_eq!(read(&[ct]), Ok(("UTF-8", None)), "{ct}");
    }
}

#[test]
fn declared_charsets_are_decoded_and_said_to_be_utf8() {
    for (ct, encoding, out) in [
        (
            "application/json; charset=utf-16",
            "UTF-16LE",
            "application/json; charset=utf-8",
        ),
        (
            "text/event-stream;charset=\"UTF-16BE\"",
            "UTF-16BE",
            "text/event-stream; charset=utf-8",
        ),
        (
            "application/json; charset=latin1",
            "windows-1252",
            "application/json; charset=utf-8",
        ),
        (
            "application/json; charset=shift_jis",
            "Shift_JIS",
            "application/json; charset=utf-8",
        ),
        // Another spelling of UTF-8, or other parameters: said plainly.
        (
            "application/json; charset=utf8",
            "UTF-8",
            "application/json; charset=utf-8",
        ),
        ("application/json; profile=x", "UTF-8", "application/json"),
        (
            "text/event-stream; charset=utf-8; q=\"a;charset=utf-16\"",
            "UTF-8",
            "text/event-stream; charset=utf-8",
        ),
        // The same charset twice is one.
        (
            "application/json; charset=utf-16le; charset=UTF-16",
            "UTF-16LE",
            "application/json; charset=utf-8",
        ),
    ] {
        assert_eq!(read(&[ct]), Ok((encoding, Some(out.to_owned()))), "{ct}");
    }
}

#[test]
fn charsets_guardwire_cannot_decode_are_refused() {
    for (ct, says) in [
        ("application/json; charset=utf-7", "utf-7"),
        ("application/json; charset=UTF-32", "UTF-32"),
        ("text/event-stream; charset=utf-32le", "utf-32le"),
        ("application/json; charset=cp037", "cp037"),
        ("application/json; charset=x-unknown", "x-unknown"),
        ("application/json; charset=iso-2022-kr", "iso-2022-kr"),
        ("application/json; charset=x-user-defined", "x-user-defined"),
        ("application/json; charset=", "charset ``"),
        ("application/json; charset=\"utf-8", "cannot be read"),
        (
            "application/json; charset=utf-8; charset=utf-16",
            "several charsets",
        ),
        (
            "application/json; charset=utf-8, text/plain",
            "utf-8, text/plain",
        ),
        ("application/json; charset*=utf-8''utf-16", "RFC 2231"),
        ("application/json; CHARSET*0=utf-16", "RFC 2231"),
        ("json", "cannot be read"),
        ("application/json, text/plain", "cannot be read"),
    ] {
        let why = read(&[ct]).unwrap_err();
        assert!(why.contains(says), "{ct}: {why}");
    }
    let why = read(&["application/json", "application/json; charset=utf-16"]).unwrap_err();
    assert!(why.contains("several Content-Type"), "{why}");
}

fn utf16(text: &str, big_endian: bool, mark: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let units = mark
        .then_some(0xFEFF)
        .into_iter()
        .chain(text.encode_utf16());
    for u in units {
        out.extend_from_slice(&match big_endian {
            true => u.to_be_bytes(),
            false => u.to_le_bytes(),
        });
    }
    out
}

/// `bytes` pushed in the pieces `cuts` makes, then finished: the pieces' output and its join.
fn chunked(encoding: &'static Encoding, bytes: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut t = Transcoder::new(encoding);
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(at, bytes.len());
        out.extend_from_slice(&t.push(Bytes::copy_from_slice(&bytes[at..cut])));
        at = cut;
    }
    out.extend_from_slice(&t.finish());
    out
}

/// What the Encoding Standard's decode gives for a body under `encoding`: a mark decides, and
/// UTF-8 without one goes through as it came.
fn reference(encoding: &'static Encoding, bytes: &[u8]) -> Vec<u8> {
    match (Encoding::for_bom(bytes), encoding == UTF_8) {
        (None, true) => bytes.to_vec(),
        (Some((e, n)), true) if e == UTF_8 => bytes[n..].to_vec(),
        _ => encoding.decode(bytes).0.into_owned().into_bytes(),
    }
}

const ENCODINGS: [&Encoding; 13] = [
    UTF_8,
    UTF_16LE,
    UTF_16BE,
    WINDOWS_1252,
    WINDOWS_1251,
    KOI8_R,
    SHIFT_JIS,
    EUC_JP,
    ISO_2022_JP,
    EUC_KR,
    GBK,
    GB18030,
    BIG5,
];

/// `text` in `encoding` (UTF-16 by hand: the standard encodes into it nothing).
fn encoded(encoding: &'static Encoding, text: &str) -> Vec<u8> {
    match encoding {
        e if e == UTF_16LE => utf16(text, false, false),
        e if e == UTF_16BE => utf16(text, true, false),
        e => e.encode(text).0.into_owned(),
    }
}

#[test]
fn utf16_answers_come_out_as_their_text_at_every_split() {
    let text = "{\"content\":\"the forbidden phrase, caf\u{e9} \u{1F600}\"}";
    for (encoding, bytes) in [
        (UTF_16LE, utf16(text, false, false)),
        (UTF_16BE, utf16(text, true, false)),
        // A mark decides over the label, and is dropped.
        (UTF_16LE, utf16(text, true, true)),
        (UTF_8, utf16(text, false, true)),
        (UTF_8, utf16(text, true, true)),
        (WINDOWS_1252, [b"\xEF\xBB\xBF", text.as_bytes()].concat()),
        (UTF_8, [b"\xEF\xBB\xBF", text.as_bytes()].concat()),
    ] {
        for cut in 0..=bytes.len() {
            let out = chunked(encoding, &bytes, &[cut]);
            assert_eq!(
                std::str::from_utf8(&out),
                Ok(text),
                "{encoding:?} cut at {cut}"
            );
        }
        for a in 0..bytes.len() {
            let out = chunked(encoding, &bytes, &[a, a + 1, a + 2, a + 3]);
            assert_eq!(std::str::from_utf8(&out), Ok(text), "{encoding:?} at {a}");
        }
    }
}

#[test]
fn utf8_without_a_mark_goes_through_uncopied() {
    let mut t = Transcoder::new(UTF_8);
    let first = Bytes::from_static(b"data: {}\n\n");
    let out = t.push(first.clone());
    assert_eq!(out.as_ptr(), first.as_ptr());
    assert!(t.passes());
    let next = Bytes::from_static(b"data: [DONE]\n\n");
    assert_eq!(t.push(next.clone()).as_ptr(), next.as_ptr());
    assert!(t.finish().is_empty());
    // A short start waits until it cannot be a mark any more.
    let mut t = Transcoder::new(UTF_8);
    assert!(t.push(Bytes::from_static(b"\xEF")).is_empty());
    assert_eq!(&t.push(Bytes::from_static(b"\xBBx"))[..], b"\xEF\xBBx");
    let mut t = Transcoder::new(UTF_8);
    assert_eq!(&t.push(Bytes::from_static(b"{")), "{");
    assert_eq!(
        &Transcoder::new(UTF_8).whole(Bytes::from_static(b"\xFF")),
        &b"\xFF"[..]
    );
    // A UTF-16 body cut in the middle of a character ends with U+FFFD.
    let out = Transcoder::new(UTF_16LE).whole(Bytes::from_static(b"a\x00b"));
    assert_eq!(std::str::from_utf8(&out), Ok("a\u{FFFD}"));
}

proptest! {
    #[test]
    fn any_text_in_any_supported_encoding_decodes_the_same_at_any_splits(
        text in "\\PC{0,40}",
        which in 0..ENCODINGS.len(),
        mark in 0..3u8,
        cuts in proptest::collection::vec(0..200usize, 0..6),
    ) {
        let encoding = ENCODINGS[which];
        let mut bytes = match mark {
            1 => b"\xEF\xBB\xBF".to_vec(),
            2 if encoding == UTF_16BE => vec![0xFE, 0xFF],
            2 => vec![0xFF, 0xFE],
            _ => Vec::new(),
        };
        let body = match (mark, encoding) {
            (1, _) => text.as_bytes().to_vec(),
            (2, e) if e == UTF_16BE => utf16(&text, true, false),
            (2, _) => utf16(&text, false, false),
            (_, e) => encoded(e, &text),
        };
        bytes.extend_from_slice(&body);
        let mut cuts = cuts;
        cuts.sort_unstable();
        let whole = Transcoder::new(encoding).whole(Bytes::from(bytes.clone()));
        prop_assert_eq!(&whole[..], &reference(encoding, &bytes)[..]);
        prop_assert_eq!(chunked(encoding, &bytes, &cuts), whole.to_vec());
        // What round-trips comes out as the text that was sent (unmappable characters are
        // numeric references in legacy encodings, which the round trip keeps; some mapped ones
        // come back as another: `¥` is Shift_JIS's 0x5C, which reads `\`).
        let (sent, _, unmappable) = encoding.encode(&text);
        let round_trips =
            !unmappable && encoding.decode_without_bom_handling(&sent).0 == text.as_str();
        if round_trips || encoding == UTF_16LE || encoding == UTF_16BE || mark > 0 {
            prop_assert_eq!(std::str::from_utf8(&whole).ok(), Some(text.as_str()));
        }
    }

    #[test]
    fn any_bytes_decode_the_same_at_every_split(
        bytes in proptest::collection::vec(any::<u8>(), 0..24),
        which in 0..ENCODINGS.len(),
    ) {
        let encoding = ENCODINGS[which];
        let whole = Transcoder::new(encoding).whole(Bytes::from(bytes.clone()));
        prop_assert_eq!(&whole[..], &reference(encoding, &bytes)[..]);
        for cut in 0..=bytes.len() {
            prop_assert_eq!(&chunked(encoding, &bytes, &[cut])[..], &whole[..]);
        }
        for a in 0..=bytes.len() {
            let every: Vec<usize> = (a..=bytes.len()).collect();
            prop_assert_eq!(&chunked(encoding, &bytes, &every)[..], &whole[..]);
        }
        if encoding != UTF_8 {
            // Decoded text is always UTF-8.
            prop_assert!(std::str::from_utf8(&whole).is_ok());
        }
    }
}
