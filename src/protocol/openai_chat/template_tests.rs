//! The stream template against reading every chunk in full: a decoder that has seen a plain
//! text chunk must decode the next chunk — the same bytes with other strings in its holes,
//! anything in them, corrupted or not — exactly as a decoder that reads it from scratch.
#![allow(clippy::unwrap_used)]

use super::skim_tests::{Gen, Rng};
use super::*;
use proptest::prelude::*;

/// A plain text chunk as providers send them (OpenAI with `obfuscation` and `service_tier`,
/// vLLM and others without), its members in random order, with unknown members mixed in.
fn base(g: &mut Gen) -> String {
    let mut top: Vec<&str> = ["id", "object", "created", "model", "system_fingerprint"]
        .into_iter()
        .filter(|_| g.rng.chance(85))
        .collect();
    for extra in ["service_tier", "obfuscation", "unknown"] {
        if g.rng.chance(40) {
            top.push(extra);
        }
    }
    top.push("choices");
    let n = top.len();
    for i in (1..n).rev() {
        let j = g.rng.below(i as u64 + 1) as usize;
        top.swap(i, j);
    }
    g.ws();
    g.out.push('{');
    for (i, k) in top.iter().enumerate() {
        if i > 0 {
            g.out.push(',');
        }
        g.ws();
        g.out.push_str(&format!("\"{k}\":"));
        g.ws();
        match *k {
            "created" => g.out.push_str("1735689600"),
            "unknown" => g.any(0),
            "choices" => choice(g),
            _ => g.string(),
        }
        g.ws();
    }
    g.out.push('}');
    g.ws();
    g.out.clone()
}

fn choice(g: &mut Gen) {
    let index = g.rng.below(2);
    let role = if g.rng.chance(20) {
        "\"role\":\"assistant\","
    } else {
        ""
    };
    let tail = if g.rng.chance(70) {
        ",\"logprobs\":null,\"finish_reason\":null"
    } else {
        ""
    };
    g.out.push_str(&format!(
        "[{{\"index\":{index},\"delta\":{{{role}\"content\":"
    ));
    g.string();
    g.out.push_str(&format!("}}{tail}}}]"));
}

/// What a decoder reports for one frame, comparable.
type Outcome = Result<(FrameKind, Vec<String>, bool, bool), ()>;

fn decode_with(d: &mut ChatStream, data: &[u8]) -> Outcome {
    let mut out = Vec::new();
    match d.decode(None, data, &mut out) {
        Ok(kind) => Ok((
            kind,
            out.iter().map(|d| format!("{d:?}")).collect(),
            d.fully_read(),
            d.usage_only(),
        )),
        Err(_) => Err(()),
    }
}

/// `base` with some of its holes refilled by `g`: a random string, or (when `rough`) anything.
fn refill(g: &mut Gen, base: &str, rough: bool) -> Option<String> {
    let mut chunk = Chunk::default();
    let (_, holes) = skim_chunk(base.as_bytes(), &mut chunk).ok()?;
    let mut out = String::new();
    let mut from = 0;
    for (start, end, _) in holes.spans()? {
        out.push_str(&base[from..start]);
        from = end;
        if g.rng.chance(40) {
            out.push_str(&base[start..end]);
            continue;
        }
        g.out.clear();
        match g.rng.below(if rough { 8 } else { 1 }) {
            // Unchanged structure keeps its shape; a string of any other shape is read
            // in full (`residual::structure_shaped`), which the rough refills try.
            0 => g.token(),
            1..=2 => g.string(),
            3 => g.out.push_str("null"),
            4 => g.out.push_str("\"unterminated"),
            5 => g.out.push_str("\"ends in a backslash\\\""),
            6 => g.out.push_str("\"raw \u{1} control\""),
            _ => g.any(0),
        }
        out.push_str(&g.out);
    }
    out.push_str(&base[from..]);
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn the_template_reads_what_a_fresh_decoder_reads(
        seed in any::<u64>(), rough in any::<bool>(), corrupt in 0..4u8,
        at in any::<prop::sample::Index>(), byte in any::<u8>(),
    ) {
        let mut g = Gen { rng: Rng(seed), weird: false, out: String::new() };
        let base = base(&mut g);
        let mut primed = ChatStream::default();
        prop_assert!(decode_with(&mut primed, base.as_bytes()).is_ok(), "{base}");
        prop_assert!(primed.template.is_some(), "not kept as a template: {base}");
        let Some(next) = refill(&mut g, &base, rough) else {
            return Err(TestCaseError::fail(format!("no holes read: {base}")));
        };
        let mut next = next.into_bytes();
        let i = at.index(next.len());
        match corrupt {
            0 => next[i] = byte,
            1 => next.insert(i, byte),
            2 => next.truncate(i),
            _ => {}
        }
        let fresh = decode_with(&mut ChatStream::default(), &next);
        prop_assert_eq!(
            decode_with(&mut primed, &next),
            fresh,
            "{}\nafter {}",
            String::from_utf8_lossy(&next),
            base
        );
    }
}

#[test]
fn refilled_chunks_take_the_template() {
    // The property above only means something if the template is actually used.
    let (mut used, mut tried) = (0, 0);
    for seed in 0..500 {
        let mut g = Gen {
            rng: Rng(seed),
            weird: false,
            out: String::new(),
        };
        let base = base(&mut g);
        let mut d = ChatStream::default();
        decode_with(&mut d, base.as_bytes()).unwrap();
        let next = refill(&mut g, &base, false).unwrap();
        tried += 1;
        if d.template
            .as_ref()
            .unwrap()
            .text(next.as_bytes(), &mut Vec::new())
            .is_some()
        {
            used += 1;
        }
    }
    assert_eq!(
        used, tried,
        "every validly refilled chunk reads from the template"
    );
}

#[test]
fn a_stream_reads_the_same_with_and_without_templates() {
    let frames = [
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"obfuscation":"x"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"obfuscation":"abcd"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo \"w\""},"finish_reason":null}],"obfuscation":"q"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":null},"finish_reason":null}],"obfuscation":"q"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":null}],"obfuscation":"q","extra":"text"}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"obfuscation":"zz"}"#,
        "[DONE]",
    ];
    let mut kept = ChatStream::default();
    for f in frames {
        let fresh = decode_with(&mut ChatStream::default(), f.as_bytes());
        assert_eq!(decode_with(&mut kept, f.as_bytes()), fresh, "{f}");
    }
}
