//! The skim reader against the JSON grammar: what it skips, reads and leaves to serde_json.

use super::*;

fn skips(json: &str) -> bool {
    let mut s = Skim::new(json.as_bytes());
    s.skip().and_then(|()| s.end()).is_ok()
}

#[test]
fn skips_exactly_what_json_allows() {
    for ok in [
        r#"{"a":[1,-2.5e+3,0,true,false,null,"x\n\u00e9\"",{}],"b":{"c":[]}}"#,
        " [ 1 , 2 ] ",
        r#""é""#,
        "0.0",
        "-0",
        "1E5",
        "\"\\ud83d\\ude00\"",
    ] {
        assert!(skips(ok), "{ok}");
        assert!(
            serde_json::from_str::<serde_json::Value>(ok).is_ok(),
            "{ok}"
        );
    }
    for bad in [
        "01",
        "1.",
        "-",
        "1e",
        ".5",
        "+1",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\"}",
        "[1 2]",
        "tru",
        "\"a\tb\"",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u+123\"",
        "\"abc",
        "[1]]",
        "{'a':1}",
        "nul",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\ud83d\\u0041\"",
        "\"\\ud83d\"",
    ] {
        assert!(!skips(bad), "{bad}");
    }
    // Long strings (past `plain_run`'s eight-byte steps): the same rules.
    let long = "garden river water light ".repeat(8);
    assert!(skips(&format!("\"{long}é{long}\"")));
    assert!(skips(&format!("\"{long}\\n{long}\"")));
    for bad in [
        format!("\"{long}\t{long}\""),
        format!("\"{long}{long}\u{1f}\""),
        format!("\"{long}{long}"),
    ] {
        assert!(!skips(&bad), "{bad:?}");
    }
    let mut invalid = format!("\"{long}").into_bytes();
    invalid.extend_from_slice(&[0xc3, b'x', b'"']);
    let mut s = Skim::new(&invalid);
    assert_eq!(s.skip(), Err(Unsure), "invalid UTF-8 after a long run");
    assert_eq!(Skim::new(&invalid).str(), Err(Unsure));
    let deep = "[".repeat(101) + &"]".repeat(101);
    assert!(!skips(&deep), "nesting beyond the limit goes to serde_json");
    let shallow = "[".repeat(100) + &"]".repeat(100);
    assert!(skips(&shallow));
}

proptest::proptest! {
    #[test]
    fn plain_run_stops_where_a_byte_loop_stops(
        // A run of plain bytes (so that runs past `SHORT_RUN` take `long_run`), then
        // anything, stops often.
        plain in proptest::collection::vec(
            proptest::prop_oneof![
                8 => 0x23u8..0x5c,
                8 => 0x5du8..0x80,
                1 => 0x80u8..=0xff,
                1 => proptest::sample::select(vec![b' ', b'!']),
            ],
            0..120,
        ),
        rest in proptest::collection::vec(
            proptest::prop_oneof![
                3 => 0x20u8..0x7f,
                1 => proptest::prelude::any::<u8>(),
                1 => proptest::sample::select(vec![b'"', b'\\', 0x1f, 0x7f, 0x80, 0xff]),
            ],
            0..40,
        )
    ) {
        let bytes = [plain, rest].concat();
        let end = bytes
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .unwrap_or(bytes.len());
        let mut non_ascii = false;
        proptest::prop_assert_eq!(plain_run(&bytes, &mut non_ascii), end);
        proptest::prop_assert_eq!(non_ascii, bytes[..end].iter().any(|&c| c >= 0x80));
    }
}

#[test]
fn strings_borrow_unless_escaped_and_integers_are_strict() {
    let mut s = Skim::new(br#"["plain", "a\nb", null, 42, 007]"#);
    let mut got = Vec::new();
    let r = s.array(|s| {
        match got.len() {
            0 | 1 => got.push(format!("{:?}", s.str()?)),
            2 => got.push(format!("{:?}", s.opt_str()?)),
            3 => got.push(s.u64()?.to_string()),
            _ => {
                s.u64()?;
            }
        }
        Ok(())
    });
    assert_eq!(r, Err(Unsure), "007 is not a JSON number");
    assert_eq!(got, ["\"plain\"", "\"a\\nb\"", "None", "42"]);
    assert!(matches!(
        Skim::new(b"\"plain\"").str(),
        Ok(Cow::Borrowed("plain"))
    ));
    assert!(matches!(Skim::new(b"\"a\\nb\"").str(), Ok(Cow::Owned(s)) if s == "a\nb"));
    for bad in ["1.0", "-1", "1e2", "18446744073709551616"] {
        assert_eq!(Skim::new(bad.as_bytes()).u64(), Err(Unsure), "{bad}");
    }
    assert_eq!(Skim::new(b"4294967296").u32(), Err(Unsure));
    assert_eq!(Skim::new(b"18446744073709551615").u64(), Ok(u64::MAX));
}
