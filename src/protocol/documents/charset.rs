//! The charset an inline document declares (`text/plain; charset=iso-2022-jp`, a `data:` URL's
//! `;charset=`): its bytes are read in it, as a reader that honours the declaration reads them
//! (Python's codecs, a browser), and as UTF-8 too, as a reader that ignores it does — bytes
//! that are valid UTF-8 may spell other text in a 7-bit charset (ISO-2022-JP's escapes, UTF-7's
//! `+…-` runs). A charset guardwire does not read is refused, never read as UTF-8 alone.

use encoding_rs::Encoding;

/// The charset a media type declares.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Declared {
    /// None, or UTF-8.
    Utf8,
    /// One of the Encoding Standard's.
    Known(&'static Encoding),
    /// UTF-7 (RFC 2152), which the Encoding Standard leaves out and Python reads.
    Utf7,
    /// A charset guardwire does not read (one the Encoding Standard maps to "replacement" —
    /// HZ, ISO-2022-KR, ISO-2022-CN — or an unknown label): its label.
    Unsupported(String),
}

/// The charset `media_type` declares (its `charset` parameter, quoted or not, any case).
pub(super) fn declared(media_type: Option<&str>) -> Declared {
    let Some(label) = media_type.and_then(charset_parameter) else {
        return Declared::Utf8;
    };
    let lower = label.trim().to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "utf-7" | "utf7" | "unicode-1-1-utf-7" | "csunicode11utf7" | "x-unicode20utf7"
    ) {
        return Declared::Utf7;
    }
    match Encoding::for_label(lower.as_bytes()) {
        Some(e) if e == encoding_rs::UTF_8 => Declared::Utf8,
        Some(e) if e == encoding_rs::REPLACEMENT => Declared::Unsupported(label),
        Some(e) => Declared::Known(e),
        None => Declared::Unsupported(label),
    }
}

/// The `charset` parameter as the WHATWG MIME parser reads it (quoted strings, the first of a
/// name): `text/plain;foo="a;charset=utf-8";charset=utf-7` declares UTF-7. A media type it
/// does not parse declares none.
fn charset_parameter(media_type: &str) -> Option<String> {
    let mime: data_url::mime::Mime = media_type.parse().ok()?;
    mime.get_parameter("charset").map(str::to_owned)
}

/// The text of `bytes` as their readers read them, each reading that differs on a line of its
/// own: in the declared charset — with a byte-order mark's say and without it (Python's
/// fixed-endian codecs ignore one the Encoding Standard obeys), and with its replacement
/// characters dropped (where a reader is more lenient: Python's ISO-2022-JP reads an escape
/// sequence right after another, which the standard marks an error) — and as UTF-8. `Err`: why
/// it cannot be read.
pub(super) fn read(bytes: &[u8], declared: &Declared) -> Result<String, String> {
    let utf8 = std::str::from_utf8(bytes).ok();
    let mut readings: Vec<String> = match declared {
        Declared::Utf8 => return utf8.map(str::to_owned).ok_or_else(|| "not UTF-8".into()),
        Declared::Known(e) => {
            let sniffed = e.decode(bytes).0.into_owned();
            // Without a byte-order mark the two readings are one: decode once.
            match Encoding::for_bom(bytes) {
                Some(_) => vec![sniffed, e.decode_without_bom_handling(bytes).0.into_owned()],
                None => vec![sniffed],
            }
        }
        Declared::Utf7 => vec![utf7(bytes).ok_or_else(|| "not UTF-7".to_owned())?],
        Declared::Unsupported(label) => return Err(format!("charset {label} is not read")),
    };
    let lenient: Vec<String> = readings
        .iter()
        .filter(|r| r.contains('\u{fffd}'))
        .map(|r| r.replace('\u{fffd}', ""))
        .collect();
    readings.extend(lenient);
    readings.extend(utf8.map(str::to_owned));
    // (A byte-order mark kept as U+FEFF says nothing: a reader does not see it.)
    for r in &mut readings {
        if let Some(rest) = r.strip_prefix('\u{feff}') {
            *r = rest.to_owned();
        }
    }
    let mut text = String::new();
    for (i, r) in readings.iter().enumerate() {
        if !readings[..i].contains(r) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(r);
        }
    }
    Ok(text)
}

/// UTF-7 as RFC 2152 (and Python) read it: `+` opens modified base64 of UTF-16 code units, up
/// to a character outside its alphabet (a `-` there is dropped); `+-` is `+`. `None`: a byte
/// outside ASCII.
fn utf7(bytes: &[u8]) -> Option<String> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        if !b.is_ascii() {
            return None;
        }
        if b != b'+' {
            units.push(u16::from(b));
            continue;
        }
        if bytes.get(i) == Some(&b'-') {
            units.push(u16::from(b'+'));
            i += 1;
            continue;
        }
        let (mut bits, mut n) = (0u32, 0u32);
        while let Some(v) = bytes.get(i).and_then(|&c| sextet(c)) {
            bits = (bits << 6) | v;
            n += 6;
            i += 1;
            if n >= 16 {
                n -= 16;
                units.push(u16::try_from((bits >> n) & 0xffff).unwrap_or(0xfffd));
                bits &= (1 << n) - 1;
            }
        }
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
    }
    Some(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(bytes: &[u8], media_type: &str) -> Result<String, String> {
        read(bytes, &declared(Some(media_type)))
    }

    #[test]
    fn seven_bit_charsets_are_read_as_declared_and_as_utf8() {
        // ISO-2022-JP: fullwidth letters behind escapes, valid UTF-8 all the same.
        let jis = b"the \x1b$B#f#o#r#b#i#d#d#e#n\x1b(B fruit";
        let t = text(jis, "text/plain; charset=iso-2022-jp").unwrap();
        assert!(t.contains("the ｆｏｒｂｉｄｄｅｎ fruit"), "{t:?}");
        assert!(t.contains("\x1b$B"), "{t:?}");
        // UTF-7, declared any way a reader accepts.
        for label in ["utf-7", "UTF-7", "\"utf7\""] {
            let t = text(
                b"the +AGYAbwByAGIAaQBkAGQAZQBu- fruit 1+-1",
                &format!("text/plain;charset={label}"),
            )
            .unwrap();
            assert!(t.starts_with("the forbidden fruit 1+1\n"), "{label}: {t:?}");
        }
        // UTF-16 with its BOM; a plain UTF-8 text read once.
        let t = text(b"\xff\xfeh\x00i\x00", "text/plain; charset=utf-16le").unwrap();
        assert_eq!(t, "hi");
        assert_eq!(text(b"hi", "text/plain; charset=utf-8").unwrap(), "hi");
        assert_eq!(text(b"hi", "text/plain").unwrap(), "hi");
    }

    #[test]
    fn readers_that_differ_are_all_read() {
        // An escape sequence right after another: the standard's error, Python's nothing.
        let t = text(
            b"the forbid\x1b(B\x1b(Bden fruit",
            "text/plain; charset=iso-2022-jp",
        )
        .unwrap();
        assert!(t.lines().any(|l| l == "the forbidden fruit"), "{t:?}");
        // A byte-order mark against the label: both readings.
        let mut le = vec![0xfe, 0xff];
        le.extend(
            "the forbidden fruit"
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        );
        let t = text(&le, "text/plain; charset=utf-16le").unwrap();
        assert!(t.contains("the forbidden fruit"), "{t:?}");
        // A quoted `;` is no parameter's end.
        let t = text(
            b"the +AGYAbwByAGIAaQBkAGQAZQBu- fruit",
            "text/plain;foo=\"a;charset=utf-8\";charset=utf-7",
        )
        .unwrap();
        assert!(t.starts_with("the forbidden fruit"), "{t:?}");
    }

    #[test]
    fn charsets_not_read_are_refused() {
        for label in ["hz-gb-2312", "iso-2022-kr", "iso-2022-cn", "x-unknown"] {
            let e = text(b"hi", &format!("text/plain; charset={label}")).unwrap_err();
            assert!(e.contains(label), "{e}");
        }
        assert_eq!(text(b"\xff", "text/plain").unwrap_err(), "not UTF-8");
        assert_eq!(
            text("é".as_bytes(), "text/plain; charset=utf-7").unwrap_err(),
            "not UTF-7"
        );
    }

    proptest::proptest! {
        /// UTF-7 as this reads it is what an encoder of any text wrote.
        #[test]
        fn utf7_reads_what_an_encoder_wrote(s in "\\PC{0,40}") {
            let mut out = String::new();
            let mut run: Vec<u16> = Vec::new();
            let flush = |run: &mut Vec<u16>, out: &mut String| {
                if run.is_empty() { return; }
                let bytes: Vec<u8> = run.iter().flat_map(|u| u.to_be_bytes()).collect();
                let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD_NO_PAD, &bytes);
                out.push('+');
                out.push_str(&b64);
                out.push('-');
                run.clear();
            };
            for c in s.chars() {
                if c.is_ascii() && c != '+' && c != '\\' && c != '~' {
                    flush(&mut run, &mut out);
                    out.push(c);
                } else {
                    let mut buf = [0u16; 2];
                    run.extend_from_slice(c.encode_utf16(&mut buf));
                }
            }
            flush(&mut run, &mut out);
            proptest::prop_assert_eq!(utf7(out.as_bytes()).unwrap(), s);
        }
    }
}
