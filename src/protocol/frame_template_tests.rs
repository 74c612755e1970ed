//! The harness of the stream templates' differential tests (`frame_template.rs`), shared by
//! the decoders that use them: a decoder that has seen a text event must decode the next
//! event — the same bytes with other values in its holes, anything in them, corrupted or
//! not — exactly as a decoder that reads it from scratch, what the fallback finds included.
#![allow(clippy::unwrap_used)]

use super::frame_template::FrameTemplate;
use super::openai_chat::skim_tests::{Gen, Rng};
use super::residual::{residual_strings, Structural};
use super::{FrameKind, StreamDecoder};
use crate::delta::Delta;

/// One protocol under test.
pub(crate) struct Subject<D> {
    pub template: fn(&D) -> Option<&FrameTemplate>,
    /// Drops the decoder's template (and nothing else of its state).
    pub forget: fn(&mut D),
    pub structural: &'static Structural,
    /// Events a stream sends before the text events (they set the decoder's state).
    pub prelude: &'static [&'static str],
    /// An event read with the stream's state, decoded after the one compared.
    pub probe: &'static str,
}

/// What a decoder reports for one event (then for the probe), comparable.
type Outcome = (
    Result<(FrameKind, Vec<String>, Vec<(usize, usize)>), ()>,
    String,
    bool,
);

/// What the fallback finds in `data` after `deltas` (`check_residual`'s reading): nothing when
/// the decoder promised it read everything.
pub(crate) fn finding(
    data: &[u8],
    deltas: &[Delta<'_>],
    fully_read: bool,
    s: &Structural,
) -> Vec<(usize, usize)> {
    if fully_read {
        return vec![(0, 0)]; // nothing left, nothing delivered by value
    }
    let mut known = Vec::new();
    for d in deltas {
        let texts: [Option<&str>; 2] = match d {
            Delta::Text { text, .. } | Delta::Repeat { text, .. } => [Some(text), None],
            Delta::ToolCallStart { id, name, .. } => [Some(name), id.as_deref()],
            Delta::Finish { reason, .. } => [Some(reason), None],
            Delta::Usage { .. } => [None, None],
        };
        for t in texts.into_iter().flatten() {
            let (base, at) = (data.as_ptr() as usize, t.as_ptr() as usize);
            if at >= base && at + t.len() <= base + data.len() {
                let off = at - base;
                let quoted = off > 0
                    && off + t.len() < data.len()
                    && data[off - 1] == b'"'
                    && data[off + t.len()] == b'"';
                known.push(if quoted {
                    off - 1..off + t.len() + 1
                } else {
                    off..off + t.len()
                });
            } else {
                known.push(usize::MAX..usize::MAX); // by value: a marker
            }
        }
    }
    let by_value = known.iter().filter(|r| r.start == usize::MAX).count();
    known.retain(|r| r.start != usize::MAX);
    known.sort_unstable_by_key(|r| r.start);
    let mut left = Vec::new();
    if residual_strings(data, s, &known, &mut left).is_err() {
        return vec![(usize::MAX, usize::MAX)]; // unwalkable
    }
    let mut found: Vec<(usize, usize)> = left.into_iter().map(|(r, _)| (r.start, r.end)).collect();
    found.push((by_value, by_value));
    found
}

fn decode_with<D: StreamDecoder>(sub: &Subject<D>, d: &mut D, data: &[u8]) -> Outcome {
    let mut out = Vec::new();
    let first = match d.decode(None, data, &mut out) {
        Ok(kind) => Ok((
            kind,
            out.iter().map(|d| format!("{d:?}")).collect(),
            finding(data, &out, d.fully_read(), sub.structural),
        )),
        Err(_) => Err(()),
    };
    let mut probe = Vec::new();
    let p = d.decode(None, sub.probe.as_bytes(), &mut probe);
    (
        first,
        format!("{p:?} {probe:?}"),
        d.complete_without_terminal(),
    )
}

fn fresh<D: StreamDecoder + Default>(sub: &Subject<D>) -> D {
    let mut d = D::default();
    for p in sub.prelude {
        d.decode(None, p.as_bytes(), &mut Vec::new()).unwrap();
    }
    d
}

/// A decoder that has read the prelude and `base` (which must make it a template).
pub(crate) fn primed<D: StreamDecoder + Default>(sub: &Subject<D>, base: &str) -> D {
    let mut d = fresh(sub);
    let mut out = Vec::new();
    d.decode(None, base.as_bytes(), &mut out).unwrap();
    assert!(
        (sub.template)(&d).is_some(),
        "not kept as a template: {base}"
    );
    d
}

/// `base` with some of its holes refilled by `g`: a random value of the hole's kind, or (when
/// `rough`) anything.
pub(crate) fn refill(g: &mut Gen, t: &FrameTemplate, base: &str, rough: bool) -> String {
    let mut out = String::new();
    let mut from = 0;
    for (start, end, _, number) in t.holes_for_tests() {
        out.push_str(&base[from..start]);
        from = end;
        if g.rng.chance(40) {
            out.push_str(&base[start..end]);
            continue;
        }
        g.out.clear();
        match g.rng.below(if rough { 9 } else { 1 }) {
            0..=2 if number => g.number(),
            // Unchanged structure keeps its shape; a string of any other shape is read
            // in full (`residual::structure_shaped`), which the rough refills try.
            0 => g.token(),
            1..=2 => g.string(),
            3 => g.out.push_str("null"),
            4 => g.out.push_str("\"unterminated"),
            5 => g.out.push_str("\"ends in a backslash\\\""),
            6 => g.out.push_str("\"raw \u{1} control\""),
            7 if number => g.string(),
            7 => g.number(),
            _ => g.any(0),
        }
        out.push_str(&g.out);
    }
    out.push_str(&base[from..]);
    out
}

/// The property: `base` primes a template; a refilled and maybe corrupted next event reads as
/// a decoder in the same state without the template reads it (the stream's state — what each
/// block is, which part's run is open — is the same for both).
pub(crate) fn check<D: StreamDecoder + Default>(
    sub: &Subject<D>,
    base: &str,
    g: &mut Gen,
    rough: bool,
    corrupt: u8,
    at: usize,
    byte: u8,
) -> Result<(), String> {
    let mut d = primed(sub, base);
    let t = (sub.template)(&d).unwrap();
    let mut next = refill(g, t, base, rough).into_bytes();
    let i = at % next.len().max(1);
    match corrupt {
        0 if !next.is_empty() => next[i] = byte,
        1 => next.insert(i, byte),
        2 => next.truncate(i),
        _ => {}
    }
    let kept = decode_with(sub, &mut d, &next);
    let mut without = primed(sub, base);
    (sub.forget)(&mut without);
    let new = decode_with(sub, &mut without, &next);
    if kept == new {
        Ok(())
    } else {
        Err(format!(
            "{}\nafter {base}\nkept {kept:?}\nfresh {new:?}",
            String::from_utf8_lossy(&next)
        ))
    }
}

/// Every validly refilled event reads from the template (the property above only means
/// something if the template is used).
pub(crate) fn refills_take_the_template<D: StreamDecoder + Default>(
    sub: &Subject<D>,
    base: fn(&mut Gen) -> String,
) {
    for seed in 0..500 {
        let mut g = Gen {
            rng: Rng(seed),
            weird: false,
            out: String::new(),
        };
        let base = base(&mut g);
        let d = primed(sub, &base);
        let t = (sub.template)(&d).unwrap();
        let next = refill(&mut g, t, &base, false);
        assert!(
            t.text(next.as_bytes(), &mut Vec::new()).is_some(),
            "{next}\nafter {base}"
        );
    }
}

/// Decodes `frames` with one decoder and each with a fresh one (after the prelude): the same
/// outcomes. Returns how many events a template read while promising the fallback nothing is
/// left.
pub(crate) fn same_stream<D: StreamDecoder + Default>(sub: &Subject<D>, frames: &[&str]) -> usize {
    let mut kept = fresh(sub);
    let mut promised = 0;
    for f in frames {
        let mut new = fresh(sub);
        let mut out = Vec::new();
        let a = new.decode(None, f.as_bytes(), &mut out).map_err(|_| ());
        let b = finding(f.as_bytes(), &out, new.fully_read(), sub.structural);
        let a = a.map(|k| {
            (
                k,
                out.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>(),
                b,
            )
        });
        let mut out = Vec::new();
        let c = kept.decode(None, f.as_bytes(), &mut out).map_err(|_| ());
        promised += usize::from(kept.fully_read());
        let e = finding(f.as_bytes(), &out, kept.fully_read(), sub.structural);
        let c = c.map(|k| {
            (
                k,
                out.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>(),
                e,
            )
        });
        assert_eq!(c, a, "{f}");
    }
    promised
}

/// An object of `members` (key, rendered value) in random order, with random whitespace.
pub(crate) fn object(g: &mut Gen, mut members: Vec<(&str, String)>) -> String {
    for i in (1..members.len()).rev() {
        let j = g.rng.below(i as u64 + 1) as usize;
        members.swap(i, j);
    }
    g.out.clear();
    g.ws();
    g.out.push('{');
    for (i, (k, v)) in members.iter().enumerate() {
        if i > 0 {
            g.out.push(',');
        }
        g.ws();
        g.out.push_str(&format!("\"{k}\":"));
        g.ws();
        g.out.push_str(v);
        g.ws();
    }
    g.out.push('}');
    g.ws();
    g.out.clone()
}

/// A rendered value: `f` run on an empty `g.out`.
pub(crate) fn value(g: &mut Gen, f: impl FnOnce(&mut Gen)) -> String {
    g.out.clear();
    f(g);
    std::mem::take(&mut g.out)
}

/// A plain text (no escapes, not empty): what a template is made of.
pub(crate) fn plain(g: &mut Gen) -> String {
    const WORDS: [&str; 6] = ["garden", " river", "é", "😀 ", "0", "{:}"];
    let n = 1 + g.rng.below(4);
    let t: String = (0..n)
        .map(|_| WORDS[g.rng.below(WORDS.len() as u64) as usize])
        .collect();
    format!("\"{t}\"")
}

/// Unknown members an upstream may add: a string, a number, anything.
pub(crate) fn extras(g: &mut Gen, members: &mut Vec<(&str, String)>) {
    if g.rng.chance(40) {
        members.push(("ts", value(g, Gen::string)));
    }
    if g.rng.chance(30) {
        members.push(("seq", value(g, Gen::number)));
    }
    if g.rng.chance(20) {
        members.push(("unknown", value(g, |g| g.any(0))));
    }
}

/// The proptest of one protocol: `base` generates its text events.
#[macro_export]
macro_rules! template_property {
    ($sub:expr, $base:expr) => {
        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

            #[test]
            fn the_template_reads_what_a_fresh_decoder_reads(
                seed in proptest::prelude::any::<u64>(),
                rough in proptest::prelude::any::<bool>(),
                corrupt in 0..4u8,
                at in proptest::prelude::any::<usize>(),
                byte in proptest::prelude::any::<u8>(),
            ) {
                let mut g = $crate::protocol::openai_chat::skim_tests::Gen {
                    rng: $crate::protocol::openai_chat::skim_tests::Rng(seed),
                    weird: false,
                    out: String::new(),
                };
                let base = $base(&mut g);
                let r = $crate::protocol::frame_template_tests::check(
                    &$sub, &base, &mut g, rough, corrupt, at, byte,
                );
                proptest::prop_assert!(r.is_ok(), "{}", r.unwrap_err());
            }
        }
    };
}
