//! Identifier-shaped values: only the secret and PII patterns read them, in a request and in an
//! answer; the word, phrase and length checks do not.

use super::*;
use proptest::prelude::*;

const PACK: &str = r#"
validators:
  - type: banned_words
    params: { words: [forbidden], direction: both }
  - type: max_length
    params: { max_characters: 3, direction: input }
  - type: regex
    params: { pattern: 'sk-[a-z0-9]{16}', expect_match: false, direction: both }
  - type: pii
    params: { types: [email], direction: input }
  - type: pii
    mode: redact
    params: { types: [email] }
"#;

fn ids(values: &[&str]) -> Conversation {
    Conversation {
        messages: vec![Message::text(
            Role::Identifiers,
            values.iter().map(|v| v.to_string()).collect(),
        )],
        tools: Vec::new(),
    }
}

fn answer_id(p: &Arc<Policy>, value: &str) -> Result<(), Finding> {
    let mut g = p.exchange_guard(Default::default(), None);
    g.check_identifier(value)?;
    g.after_call()
}

#[test]
fn identifiers_meet_the_patterns_but_not_the_words() {
    let p = policy(PACK).unwrap();
    // Words and lengths do not read identifiers ...
    assert!(before_call(&p, &ids(&["forbidden-ctx", "abcdef"])).is_ok());
    assert!(answer_id(&p, "forbidden_task").is_ok());
    // ... the same value as text is read by them.
    let text = Conversation {
        messages: vec![Message::text(Role::User, vec!["forbidden-ctx".into()])],
        tools: Vec::new(),
    };
    assert_eq!(before_call(&p, &text).unwrap_err().validator, 0);
    // Secrets and PII are found in identifiers, and a redacting check blocks (an identifier is
    // not rewritten).
    assert_eq!(
        before_call(&p, &ids(&["ctx-sk-0123456789abcdef"]))
            .unwrap_err()
            .validator,
        2
    );
    assert_eq!(
        answer_id(&p, "ctx-sk-0123456789abcdef")
            .unwrap_err()
            .validator,
        2
    );
    assert_eq!(
        before_call(&p, &ids(&["msg-alice@example.com"]))
            .unwrap_err()
            .validator,
        3
    );
    assert_eq!(answer_id(&p, "alice@example.com").unwrap_err().validator, 4);
}

#[test]
fn a_repeated_identifier_is_judged_each_time_until_it_passed() {
    let p = policy(PACK).unwrap();
    let mut g = p.exchange_guard(Default::default(), None);
    assert!(g.check_identifier("chatcmpl-1").is_ok());
    assert!(g.check_identifier("chatcmpl-1").is_ok());
    assert!(g.check_identifier("sk-0123456789abcdef").is_err());
    assert!(g.check_identifier("sk-0123456789abcdef").is_err());
}

proptest! {
    /// A secret anywhere in an identifier is found, whatever surrounds it.
    #[test]
    fn a_secret_anywhere_in_an_identifier_is_found(
        head in "[A-Za-z0-9_-]{0,12}",
        key in "[a-z0-9]{16}",
        tail in "[A-Z_-]{0,12}",
    ) {
        let p = policy(PACK).unwrap();
        let value = format!("{head}sk-{key}{tail}");
        prop_assert!(before_call(&p, &ids(&[&value])).is_err());
        prop_assert!(answer_id(&p, &value).is_err());
    }
}

/// A `data:` URL carries its content inline: an answer's or a call's identifier-shaped one is
/// read decoded by every check (images and audio aside).
#[test]
fn a_data_url_is_read_as_its_content() {
    use base64::Engine;
    let p = policy(PACK).unwrap();
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    let plain = format!("data:text/plain;base64,{}", b64("the forbidden fruit"));
    let html = "data:text/html,%3Cb%3Eforbidden%3C/b%3E".to_owned();
    let svg = format!(
        "data:image/svg+xml;base64,{}",
        b64("<svg><text>forbidden</text></svg>")
    );
    let bytes = format!("data:application/octet-stream;base64,{}", b64("forbidden"));
    let key = format!("data:,{}", "sk-0123456789abcdef");
    for url in [&plain, &html, &svg, &bytes, &key] {
        assert!(answer_id(&p, url).is_err(), "{url}");
        assert!(before_call(&p, &ids(&[url])).is_err(), "{url}");
    }
    // A string value of an answer read as text (not an identifier's shape, or a field read
    // as text): its content too.
    let long = format!(
        "data:text/plain;base64,{}",
        b64(&format!("{} forbidden", "a ".repeat(600)))
    );
    for url in [&plain, &long] {
        let mut g = p.exchange_guard(Default::default(), None);
        let delta = Delta::Text {
            choice: 0,
            channel: Channel::Other(3),
            text: Cow::Borrowed(url.as_str()),
        };
        let verdict = g.on_chunk(&delta).map(|_| ()).and_then(|()| g.after_call());
        assert!(verdict.is_err(), "{url}");
    }
    // An image is exempt; bytes said to be one that are text are read as the text they are.
    let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg==";
    let harmless = format!("data:text/plain;base64,{}", b64("all fine"));
    for url in [png, &harmless] {
        assert!(answer_id(&p, url).is_ok(), "{url}");
    }
    let text_as_png = format!("data:image/png;base64,{}", b64("forbidden"));
    assert!(answer_id(&p, &text_as_png).is_err());
}
