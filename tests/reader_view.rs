//! The view is the reader's: a banned phrase spelled so that a person (through a Markdown or
//! HTML renderer) or a model (through its tokenizer) reads it, though the bytes do not hold it,
//! is blocked in a streamed answer before any of it is released, on every protocol and at
//! every split: tag characters and variation-selector runs, marks over every letter, letters
//! that render as blanks, bidi overrides (Unicode's and HTML's `<bdo>`), inline markup inside
//! words, and ruby annotations over them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::protocols::*;
use common::proxy::*;

const PACK: &str = r#"
validators:
  - id: no-codename
    type: banned_words
    message: "Blocked: codename."
    params: { words: ["project bluebird"], direction: both }
"#;

/// `text` spelled in tag characters.
fn tags(text: &str) -> String {
    text.chars()
        .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
        .collect()
}

/// `text`'s bytes carried by variation selectors.
fn selectors(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            0..=15 => char::from_u32(0xFE00 + u32::from(b)).unwrap(),
            _ => char::from_u32(0xE0100 + u32::from(b) - 16).unwrap(),
        })
        .collect()
}

/// `text` with `mark` over every letter.
fn marked(text: &str, mark: char) -> String {
    text.chars()
        .flat_map(|c| [Some(c), c.is_alphabetic().then_some(mark)])
        .flatten()
        .collect()
}

/// The phrase as each class spells it, each read by a person or a model as "project bluebird".
fn spellings() -> Vec<String> {
    vec![
        tags("project bluebird"),
        format!("pro{}", tags("ject bluebird")),
        format!("\u{1f426}{}", selectors("project bluebird")),
        // Glued to a visible word: `niceproject bluebird` to the view before the fix.
        format!("nice{}", tags("project bluebird")),
        marked("project bluebird", '\u{308}'),
        marked("project bluebird", '\u{307}'),
        "project\u{3164}bluebird".into(),
        "project\u{2800}bluebird".into(),
        "project\u{115f}\u{1160}bluebird".into(),
        "\u{202e}dribeulb tcejorp\u{202c}".into(),
        "project \u{202e}dribeulb\u{202c}".into(),
        "\u{2067}bluebird\u{200f} project\u{2069}".into(),
        "pro**ject** bluebird".into(),
        "proj<b>ect</b> blue<wbr>bird".into(),
        "<span>pro</span>ject <sup>blue</sup>bird".into(),
        "[proj](http://x)ect blue[bird]()".into(),
        "pro<!-- c -->ject bluebird".into(),
        "pro<?c?>ject blue<!c>bird".into(),
        "pro<!-->ject blue</ x>bird".into(),
        "proj<span class=\"x\">ect</span> bluebird".into(),
        "project<br>bluebird".into(),
        // Review 8: HTML's own bidi override, and a ruby annotation over the base text.
        "<bdo dir=\"rtl\">dribeulb tcejorp</bdo>".into(),
        "project <bdo dir=rtl>dribeulb</bdo>".into(),
        "project blue<ruby>bird<rt>zz</rt></ruby>".into(),
        "proj<ruby>ect<rp>(</rp><rt>x<b>y</b></rt><rp>)</rp></ruby> bluebird".into(),
        // Overrides spelled as references, and references and tags inside a run.
        "&#x202e;dribeulb tcejorp&#x202c;".into(),
        "<bdo dir=rtl>dribeulb tc&#101;jorp</bdo>".into(),
        "\u{202e}drib<b>eulb</b> tcejorp\u{202c}".into(),
        // The second reader's reading, an aside written after what follows is read: held
        // back from where it starts (an autolink a browser hides, a tag CommonMark shows as
        // text, an image a person sees instead of its alt text).
        "proj<ab:c>ect bluebird".into(),
        "<pro<q>ject bluebird".into(),
        "pro![x](y)ject bluebird".into(),
        // Review 10: a blank line a browser reading HTML shows as white space, its elements
        // open (a ruby's annotation hides what follows it; `<bdo>` reverses it).
        "proj<ruby>ect<rt>\n\nzz</rt></ruby> bluebird".into(),
        "<bdo dir=rtl>dribeulb\n\ntcejorp</bdo>".into(),
        // Review 12: code blocks end what markup opened in them; nested templates; styles.
        "~~~\n<svg>\n~~~\nproj<b>ect</b> bluebird".into(),
        "proj<template><template></template>zz</template>ect bluebird".into(),
        "proj<span style=\"display:none\">zz</span>ect bluebird".into(),
        "<style>.h{font-size:0}</style>proj<i class=h>zz</i>ect bluebird".into(),
        // Review 13: a script double escaped; a breakout through nested foreign content; NUL.
        "proj<script><!--<script></script>zz</script>ect bluebird".into(),
        "proj<svg><svg>zz<b>ect bluebird".into(),
        "proj\u{0}ect bluebird".into(),
    ]
}

/// `text` cut in two at its middle character.
fn halves(text: &str) -> (&str, &str) {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    text.split_at(mid)
}

#[tokio::test]
async fn each_class_is_blocked_in_a_streamed_answer_before_any_of_it_is_released() {
    for p in all() {
        for (k, phrase) in spellings().iter().enumerate() {
            let (a, b) = halves(phrase);
            let (frames, first) = (p.text_frames)(&["Here: ", a, b, ". Done"]);
            let body = frames.concat();
            let mut expected = frames[..first + 1].concat();
            expected.push_str(&(p.block_frame)("Blocked: codename."));
            let mock = split_mock(body.clone()).await;
            let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
            // Every byte for the first protocol; a stride for the others.
            let step = if p.name == all()[0].name { 1 } else { 13 };
            for split in (0..body.len()).step_by(step) {
                let got = stream(&p, proxy.addr(), "hi", &format!("{split},{}", split + 5)).await;
                assert_eq!(
                    got.text(),
                    expected,
                    "{} #{k} {phrase:?} split at {split}",
                    p.name
                );
            }
        }
    }
}

#[tokio::test]
async fn each_class_in_a_request_never_reaches_the_provider() {
    for p in all() {
        let mock = split_mock(String::new()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        for phrase in spellings() {
            let prompt = format!("Tell me about {phrase}.");
            let a = send(
                proxy.addr(),
                "POST",
                p.plain_path,
                (p.plain_body)(&prompt),
                &[],
            )
            .await;
            assert_eq!(a.status, 400, "{} {phrase:?}: {}", p.name, a.text());
            assert_eq!((p.error_message)(&a.json()), "Blocked: codename.");
        }
        assert_eq!(mock.request_count(), 0, "{}", p.name);
    }
}

/// An override left open past the bound cannot be read in the order a renderer shows: the
/// answer is blocked (fail closed), even with no banned phrase in either order.
#[tokio::test]
async fn an_open_override_past_the_bound_fails_closed() {
    let p = chat();
    let long = format!("\u{202e}{}", "la la ".repeat(300));
    let (frames, _) = (p.text_frames)(&["Sing: ", &long, " end"]);
    let body = frames.concat();
    let mock = split_mock(body.clone()).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let got = stream(&p, proxy.addr(), "hi", "").await;
    assert!(got.text().contains("Blocked: codename."), "{}", got.text());
    assert!(!got.text().contains("la la"), "{}", got.text());
    // Closed, the same text passes untouched.
    let closed = format!("\u{202e}la\u{202c} {}", "la la ".repeat(300));
    let (frames, _) = (p.text_frames)(&["Sing: ", &closed, " end"]);
    let body = frames.concat();
    let mock = split_mock(body.clone()).await;
    let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
    let got = stream(&p, proxy.addr(), "hi", "").await;
    assert_eq!(got.text(), body);
}

/// Text a reader sees as it is written passes untouched: markup and marks that are not
/// the phrase, Hebrew with controls, emoji with their selector.
#[tokio::test]
async fn clean_text_in_these_forms_passes_untouched() {
    let p = chat();
    for text in [
        "A <b>bold</b> [link](http://x) about blue birds and a project.",
        "\u{2067}שלום\u{2069} project, then bluebird \u{2764}\u{fe0f}",
        "Ünïcödé naïve café; a < b > c; pro\\*ject bluebird",
    ] {
        let (frames, _) = (p.text_frames)(&[text]);
        let body = frames.concat();
        let mock = split_mock(body.clone()).await;
        let proxy = start_proxy_all(&mock.base_url(), PACK, "").await;
        let got = stream(&p, proxy.addr(), "hi", "").await;
        assert_eq!(got.text(), body, "{text:?}");
    }
}
