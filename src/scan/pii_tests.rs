#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use proptest::prelude::*;

fn matcher() -> &'static PiiMatcher {
    static M: std::sync::OnceLock<PiiMatcher> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        PiiMatcher::new(&[PiiRule {
            kinds: PiiKind::ALL.to_vec(),
            owner: 7,
        }])
        .unwrap()
    })
}

/// A hit as (kind, start, end).
type Found = (&'static str, u64, u64);

/// Every hit with the largest safe position seen before it was reported.
fn scan_bytes(m: &PiiMatcher, pieces: &[&[u8]]) -> Vec<(Hit, u64)> {
    let mut st = m.start();
    let mut hits = Vec::new();
    let mut seen = Vec::new();
    let mut pos = 0u64;
    let mut max_safe = 0;
    for p in pieces {
        let before = hits.len();
        m.feed(&mut st, pos, p, &mut hits);
        pos += p.len() as u64;
        seen.extend(hits[before..].iter().map(|h| (*h, max_safe)));
        let safe = m.safe_pos(&st, pos);
        assert!(safe <= pos);
        assert!(safe >= max_safe, "safe_pos went back: {safe} < {max_safe}");
        max_safe = safe;
    }
    let before = hits.len();
    m.finish(&mut st, pos, &mut hits);
    seen.extend(hits[before..].iter().map(|h| (*h, max_safe)));
    assert_eq!(m.safe_pos(&st, pos), pos, "nothing is held after finish");
    seen
}

fn found_in(seen: &[(Hit, u64)]) -> Vec<Found> {
    let mut v: Vec<Found> = seen
        .iter()
        .map(|(h, _)| {
            assert_eq!(h.owner, 7);
            (h.rule.unwrap(), h.start.unwrap(), h.end)
        })
        .collect();
    v.sort_unstable();
    v
}

fn found(text: &str) -> Vec<Found> {
    found_in(&scan_bytes(matcher(), &[text.as_bytes()]))
}

/// The hits in `text`, as (kind, matched text).
fn spans(text: &str) -> Vec<(&'static str, String)> {
    found(text)
        .into_iter()
        .map(|(k, s, e)| (k, text[s as usize..e as usize].to_owned()))
        .collect()
}

/// `text` holds exactly one hit: `kind` on `sample` (at its first occurrence).
fn assert_one(kind: &str, sample: &str, text: &str) {
    let start = text.find(sample).unwrap() as u64;
    assert_eq!(
        found(text),
        vec![(kind_name(kind), start, start + sample.len() as u64)],
        "in {text:?}"
    );
}

fn kind_name(kind: &str) -> &'static str {
    PiiKind::parse(kind).unwrap().name()
}

fn assert_none(text: &str) {
    assert_eq!(spans(text), vec![], "in {text:?}");
}

#[test]
fn kinds_have_names() {
    for k in PiiKind::ALL {
        assert_eq!(PiiKind::parse(k.name()), Some(k));
    }
    assert_eq!(PiiKind::parse("Credit-Card"), Some(PiiKind::CreditCard));
    assert_eq!(PiiKind::parse("passport"), None);
}

#[test]
fn emails() {
    assert_one(
        "email",
        "john.doe@example.com",
        "mail john.doe@example.com now",
    );
    assert_one(
        "email",
        "a.b+tag@mail.example.co.uk",
        "<a.b+tag@mail.example.co.uk>.",
    );
    assert_one("email", "x_y@sub-domain.io", "x_y@sub-domain.io");
    assert_none("user@localhost, x@y.c, @example.com, a@b");
    assert_none("a@-bad.com");
}

#[test]
fn phones() {
    for p in [
        "(415) 555-0132",
        "415-555-0132",
        "415.555.0132",
        "+1 415 555 0132",
        "1-415-555-0132",
        "+44 20 7946 0958",
        "+49 30 123456",
        "+14155550132",
        "+33 1 23 45 67 89",
    ] {
        assert_one("phone", p, &format!("call {p} today"));
    }
    assert_none("on 2024-01-15 at 10:30");
    assert_none("version 1.2.3 and 10.4.15");
    assert_none("ref 4155550132 and 123-456-7890 and 555-0132");
    assert_none("2+2 = 4, +12 34");
}

#[test]
fn credit_cards_need_luhn() {
    assert_one(
        "credit_card",
        "4111 1111 1111 1111",
        "card 4111 1111 1111 1111.",
    );
    assert_one(
        "credit_card",
        "4111-1111-1111-1111",
        "(4111-1111-1111-1111)",
    );
    assert_one("credit_card", "5555555555554444", "mc 5555555555554444 ok");
    assert_one("credit_card", "3782 822463 10005", "amex 3782 822463 10005");
    assert_none("card 4111 1111 1111 1112.");
    assert_none("4111-1111 1111-1111 mixed separators");
    assert_none("0000 0000 0000 0000");
    // An earlier number in the same digit run does not hide the card.
    assert_one(
        "credit_card",
        "4111 1111 1111 1111",
        "order 12 4111 1111 1111 1111",
    );
}

#[test]
fn ibans_need_mod_97() {
    assert_one(
        "iban",
        "DE89 3704 0044 0532 0130 00",
        "IBAN: DE89 3704 0044 0532 0130 00 (EUR)",
    );
    assert_one(
        "iban",
        "GB82WEST12345698765432",
        "pay GB82WEST12345698765432 now",
    );
    assert_one(
        "iban",
        "DE89 3704 0044 0532 0130 00",
        "DE89 3704 0044 0532 0130 00 EUR",
    );
    assert_none("IBAN: DE89 3704 0044 0532 0130 01");
    assert_none("pay GB82WEST12345698765433 now");
    assert_none("gb82west12345698765432");
    assert_none("DE89 37040 044 0532 0130 00");
}

#[test]
fn ssns() {
    assert_one("ssn", "123-45-6789", "ssn: 123-45-6789.");
    for bad in [
        "000-12-3456",
        "666-12-3456",
        "912-34-5678",
        "123-00-4567",
        "123-45-0000",
    ] {
        assert_none(&format!("ssn {bad} x"));
    }
    assert_none("123-45-67890 and 1123-45-6789");
}

#[test]
fn ipv4() {
    assert_one("ipv4", "192.168.0.1", "host 192.168.0.1:8080");
    assert_one("ipv4", "8.8.8.8", "dns is 8.8.8.8.");
    assert_one("ipv4", "10.0.0.255", "10.0.0.255");
    assert_none("256.1.1.1 and 1.2.3.4.5 and 1.2.3 and 1.2.3.4.5.6.7.8");
    assert_none("v1.2.3.4.x");
    // Runs longer than the reverse run's reach are still seen to go on.
    assert_none("1.2.3.4.56789012345678 and 255.255.255.255.1.1.1.1.1.1.1.1.1");
    assert_none("1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1.1");
    assert_none("1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1::1:1:1:1:1:1:1:1:1:1");
}

#[test]
fn ipv6() {
    for a in [
        "2001:db8::1",
        "fe80::1ff:fe23:4567:890a",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "::1",
    ] {
        assert_one("ipv6", a, &format!("addr {a} up"));
    }
    assert_none("at 12:30:45, std::vec::Vec, a::b, dead::beef");
    assert_none("1:2:3:4:5:6:7:8:9 and 1:2:3 and 1::2::3");
}

#[test]
fn api_keys() {
    let keys = [
        "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-ab",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
        "sk-abcdefghijklmnopqrstuvwxyz0123",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "xoxb-123456789012-abcdefGHIJ",
        "AIzaSyA1234567890abcdefghijklmnopqrst-_",
        "sk_live_abcdefghijklmnopqrstuvwx",
        "rk_live_ABCDEFGHIJKLMNOPQRSTUVWX",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----",
    ];
    for k in keys {
        assert_one("api_key", k, &format!("key={k}\nnext"));
        assert_one("api_key", k, k);
    }
    assert_none("task-force sk-short AKIAIOSFODNN7EXAMPL AKIAIOSFODNN7EXAMPLEX");
    assert_none("ghp_short ask-abcdefghijklmnopqrstuvwxyz0123 -----BEGIN PUBLIC KEY-----");
    assert_none("AIzaSyA1234567890abcdefghijklmnopqrst-_X");
}

#[test]
fn only_the_kinds_asked_for_are_found_and_each_owner_gets_its_hits() {
    let m = PiiMatcher::new(&[
        PiiRule {
            kinds: vec![PiiKind::Email],
            owner: 1,
        },
        PiiRule {
            kinds: vec![PiiKind::Email, PiiKind::Ssn],
            owner: 2,
        },
    ])
    .unwrap();
    assert_eq!(m.kinds(), vec![PiiKind::Email, PiiKind::Ssn]);
    let text = b"a@b.co 123-45-6789 8.8.8.8";
    let mut hits: Vec<(u32, &str)> = scan_bytes(&m, &[text])
        .into_iter()
        .map(|(h, _)| (h.owner, h.rule.unwrap()))
        .collect();
    hits.sort_unstable();
    assert_eq!(hits, vec![(1, "email"), (2, "email"), (2, "ssn")]);
}

#[test]
fn a_candidate_is_held_until_decided_and_a_failed_one_is_released() {
    let m = matcher();
    let mut st = m.start();
    let mut hits = Vec::new();
    m.feed(&mut st, 0, b"card 4111 1111 1111 111", &mut hits);
    assert!(m.safe_pos(&st, 23) <= 5, "the digits are held");
    m.feed(&mut st, 23, b"2", &mut hits);
    assert!(m.safe_pos(&st, 24) <= 5);
    m.feed(&mut st, 24, b" and more text", &mut hits);
    assert!(hits.is_empty(), "{hits:?}");
    assert_eq!(
        m.safe_pos(&st, 38),
        34,
        "the failed candidate is released (a word might still become an e-mail)"
    );
    m.feed(&mut st, 38, b" ", &mut hits);
    assert_eq!(m.safe_pos(&st, 39), 39);

    let mut st = m.start();
    m.feed(&mut st, 0, b"card 4111 1111 1111 111", &mut hits);
    m.feed(&mut st, 23, b"1", &mut hits);
    assert!(m.safe_pos(&st, 24) <= 5);
    m.feed(&mut st, 24, b" ok", &mut hits);
    assert!(
        hits.is_empty(),
        "reported once the automaton is idle after it"
    );
    assert_eq!(m.safe_pos(&st, 27), 5);
    m.feed(&mut st, 27, b" ", &mut hits);
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].start, hits[0].end), (Some(5), 24));
    assert_eq!(m.safe_pos(&st, 28), 28);
}

#[test]
fn a_pending_hit_waits_for_a_longer_one() {
    let m = matcher();
    let mut st = m.start();
    let mut hits = Vec::new();
    m.feed(&mut st, 0, b"to a@mail.example", &mut hits);
    m.feed(&mut st, 17, b".", &mut hits);
    assert!(hits.is_empty(), "a@mail.example may go on");
    assert!(m.safe_pos(&st, 18) <= 3);
    m.feed(&mut st, 18, b"com, thanks", &mut hits);
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].start, hits[0].end), (Some(3), 21));
}

#[test]
fn long_candidates_are_cut_to_the_window() {
    let local = "a".repeat(400);
    let text = format!("{local}@example.com");
    let f = found(&text);
    assert_eq!(f.len(), 1);
    let (_, start, end) = f[0];
    assert_eq!(end, text.len() as u64);
    assert_eq!(start, end - pii::MAX_SPAN as u64);
}

#[test]
fn automata_are_small_and_quick_to_build() {
    let t = std::time::Instant::now();
    let m = PiiMatcher::new(&[PiiRule {
        kinds: Vec::new(),
        owner: 0,
    }])
    .unwrap();
    let built = t.elapsed();
    let bytes = m.memory_usage();
    eprintln!(
        "pii, all kinds: {:.1} KiB of DFAs, built in {:.1} ms (test profile)",
        bytes as f64 / 1024.0,
        built.as_secs_f64() * 1e3
    );
    for k in PiiKind::ALL {
        let one = PiiMatcher::new(&[PiiRule {
            kinds: vec![k],
            owner: 0,
        }])
        .unwrap();
        eprintln!(
            "  {:<12} {:>8.1} KiB",
            k.name(),
            one.memory_usage() as f64 / 1024.0
        );
    }
    assert!(bytes < 4 << 20, "{bytes} bytes");
}

const MIXED: [&str; 6] = [
    "Contact john.doe@example.com or (415) 555-0132; card 4111 1111 1111 1111, \
     not 4111 1111 1111 1112. SSN 123-45-6789 / 666-12-3456.",
    "IBAN DE89 3704 0044 0532 0130 00 and GB82WEST12345698765432 vs GB82WEST12345698765433. \
     Hosts 192.168.0.1, 256.1.1.1, 1.2.3.4.5 and 2001:db8::1 or fe80::1ff:fe23:4567:890a.",
    "keys: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 AKIAIOSFODNN7EXAMPLE \
     ghp_abcdefghijklmnopqrstuvwxyz0123456789 AIzaSyA1234567890abcdefghijklmnopqrst-_\n\
     -----BEGIN RSA PRIVATE KEY-----\nMIIE... xoxb-123456789012-abcdefGHIJ",
    "Zürich café: +44 20 7946 0958, +1 415 555 0132 ☎, a@mail.example.com. 8.8.8.8. \
     order 12 4111 1111 1111 1111 on 2024-01-15 v1.2.3 at 12:30:45 std::io",
    "1.2.3.4.5.6 4111111111111111 5555555555554444x a@b.c a@b.co.uk. ::1 \
     sk_live_abcdefghijklmnopqrstuvwx",
    "4111 1111 1111 1111 4111 1111 1111 1111 1 2 3 DE89370400440532013000DE89 \
     +1-415-555-0132-0 x@y.zz@w.com",
];

/// Hits of `text` fed in `pieces` (cut at byte offsets `cuts`) are those of the whole text, and
/// no byte of a hit was ever released (before `safe_pos`) before the hit was reported.
fn check_split(m: &PiiMatcher, text: &[u8], cuts: &[usize], whole: &[Found]) {
    let mut pieces = Vec::new();
    let mut last = 0;
    for &c in cuts {
        if c > last && c < text.len() {
            pieces.push(&text[last..c]);
            last = c;
        }
    }
    pieces.push(&text[last..]);
    let seen = scan_bytes(m, &pieces);
    assert_eq!(found_in(&seen), whole, "cuts {cuts:?}");
    for (hit, safe_before) in seen {
        assert!(
            safe_before <= hit.start.unwrap(),
            "released up to {safe_before} before reporting {hit:?} (cuts {cuts:?})"
        );
    }
}

#[test]
fn mixed_texts_give_the_expected_hits() {
    let kinds: Vec<Vec<&str>> = MIXED
        .iter()
        .map(|t| spans(t).into_iter().map(|(k, _)| k).collect())
        .collect();
    for (t, k) in MIXED.iter().zip(&kinds) {
        eprintln!("{:?}", spans(t));
        assert!(!k.is_empty(), "{t}");
    }
    assert_eq!(
        kinds[0],
        vec!["credit_card", "email", "phone", "ssn"],
        "{:?}",
        spans(MIXED[0])
    );
    assert_eq!(kinds[1], vec!["iban", "iban", "ipv4", "ipv6", "ipv6"]);
    assert_eq!(kinds[2], vec!["api_key"; 6]);
}

#[test]
fn every_byte_split_gives_the_whole_texts_hits_without_leaks() {
    let m = matcher();
    for text in MIXED {
        let bytes = text.as_bytes();
        let whole = found(text);
        for i in 0..=bytes.len() {
            check_split(m, bytes, &[i], &whole);
        }
        // Every byte alone.
        let all: Vec<usize> = (1..bytes.len()).collect();
        check_split(m, bytes, &all, &whole);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_splits_give_the_whole_texts_hits(
        which in 0..MIXED.len(),
        cuts in proptest::collection::vec(0usize..260, 0..16),
    ) {
        let text = MIXED[which].as_bytes();
        let mut cuts = cuts;
        cuts.sort_unstable();
        check_split(matcher(), text, &cuts, &found(MIXED[which]));
    }

    #[test]
    fn random_texts_split_anywhere_give_the_same_hits(
        words in proptest::collection::vec(
            prop_oneof![
                Just("4111"), Just("1111"), Just(" "), Just("-"), Just("."), Just("@"),
                Just("a"), Just("example"), Just("com"), Just("1"), Just("255"), Just("::"),
                Just(":"), Just("db8"), Just("+"), Just("44"), Just("("), Just(")"),
                Just("DE89"), Just("3704"), Just("sk-"), Just("AKIA"), Just("é"),
                Just("12345678901234567890"), Just("\n"), Just("_"),
            ],
            0..40,
        ),
        cuts in proptest::collection::vec(0usize..200, 0..10),
    ) {
        let text: String = words.concat();
        let mut cuts = cuts;
        cuts.sort_unstable();
        let whole = found(&text);
        check_split(matcher(), text.as_bytes(), &cuts, &whole);
    }
}

#[test]
fn the_matcher_is_shared_across_threads() {
    fn shared<T: Send + Sync + std::fmt::Debug>() {}
    shared::<PiiMatcher>();
}

#[test]
fn scan_sets_carry_the_pii_matcher() {
    let empty = PiiMatcher::new(&[]).unwrap();
    assert!(empty.is_empty());
    let set = ScanSet::new(None, ForbiddenRegexes::default(), Some(empty));
    assert!(set.is_empty(), "a matcher without kinds is dropped");

    let m = PiiMatcher::new(&[PiiRule {
        kinds: vec![PiiKind::Ssn],
        owner: 3,
    }])
    .unwrap();
    let set = ScanSet::new(None, ForbiddenRegexes::default(), Some(m));
    assert!(!set.is_empty());
    assert!(set.memory_usage() > 0);
    let mut st = set.start();
    let mut hits = Vec::new();
    set.feed(&mut st, "ssn 123-4", &mut hits);
    assert_eq!(set.safe_pos(&st), 4);
    set.feed(&mut st, "5-6789", &mut hits);
    set.finish(&mut st, &mut hits);
    assert_eq!(
        hits,
        vec![Hit {
            owner: 3,
            start: Some(4),
            end: 15,
            rule: Some("ssn"),
        }]
    );
    assert!(st.heap_bytes() >= 15);
}
