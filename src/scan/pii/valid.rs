//! Whether a candidate the shapes found is the real thing: checksums (Luhn for cards, mod 97
//! for IBANs) and number plans (NANP, SSN areas, IP address ranges). Run once per candidate
//! match, never per byte.

fn digits(t: &[u8]) -> impl Iterator<Item = u8> + '_ {
    t.iter().filter(|b| b.is_ascii_digit()).map(|b| b - b'0')
}

/// North-American number: optional country code 1, area and exchange codes not starting 0/1.
pub(super) fn valid_nanp(t: &[u8]) -> bool {
    let d: Vec<u8> = digits(t).collect();
    let d = match d.len() {
        10 => &d[..],
        11 if d[0] == 1 => &d[1..],
        _ => return false,
    };
    d[0] >= 2 && d[3] >= 2
}

/// E.164: `+`, country code, 8–15 digits in all.
pub(super) fn valid_intl(t: &[u8]) -> bool {
    (8..=15).contains(&digits(t).count())
}

/// 13–19 digits passing Luhn; groups (if any) split by one kind of separator, the first of 4.
pub(super) fn valid_card(t: &[u8]) -> bool {
    let n = digits(t).count();
    if !(13..=19).contains(&n) || digits(t).all(|d| d == 0) {
        return false;
    }
    let seps: Vec<u8> = t.iter().copied().filter(|b| !b.is_ascii_digit()).collect();
    if let Some(&sep) = seps.first() {
        if seps.iter().any(|&s| s != sep) {
            return false;
        }
        let groups: Vec<usize> = t.split(|&b| b == sep).map(<[u8]>::len).collect();
        let last = groups.len() - 1;
        let ok = groups.iter().enumerate().all(|(i, &len)| match i {
            0 => len == 4,
            i if i == last => (3..=6).contains(&len),
            _ => (4..=6).contains(&len),
        });
        if !ok {
            return false;
        }
    }
    luhn(t)
}

pub(super) fn luhn(t: &[u8]) -> bool {
    let sum: u32 = digits(t)
        .collect::<Vec<u8>>()
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Country code, check digits, 11–30 alphanumerics (compact or in groups of 4), mod 97 = 1.
pub(super) fn valid_iban(t: &[u8]) -> bool {
    if t.contains(&b' ') {
        let groups: Vec<&[u8]> = t.split(|&b| b == b' ').collect();
        let last = groups.len() - 1;
        let ok = groups.iter().enumerate().all(|(i, g)| {
            if i == last {
                (1..=4).contains(&g.len())
            } else {
                g.len() == 4
            }
        });
        if !ok {
            return false;
        }
    }
    let c: Vec<u8> = t.iter().copied().filter(|&b| b != b' ').collect();
    if !(15..=34).contains(&c.len())
        || !c[..2].iter().all(u8::is_ascii_uppercase)
        || !c[2..4].iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    let mut rem: u32 = 0;
    for &b in c[4..].iter().chain(&c[..4]) {
        let v = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// `AAA-GG-SSSS`: area not 000, 666 or 9xx; group not 00; serial not 0000.
pub(super) fn valid_ssn(t: &[u8]) -> bool {
    let d: Vec<u8> = digits(t).collect();
    if d.len() != 9 {
        return false;
    }
    let area = &d[..3];
    area != [0, 0, 0] && area != [6, 6, 6] && area[0] != 9 && d[3..5] != [0, 0] && d[5..] != [0; 4]
}

/// Four dotted decimal octets of 1–3 digits, each at most 255.
pub(super) fn valid_ipv4(t: &[u8]) -> bool {
    let parts: Vec<&[u8]> = t.split(|&b| b == b'.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            (1..=3).contains(&p.len())
                && p.iter().all(u8::is_ascii_digit)
                && p.iter()
                    .fold(0u32, |acc, &b| acc * 10 + u32::from(b - b'0'))
                    <= 255
        })
}

/// Eight groups of 1–4 hex digits, or fewer with one `::`; at least one decimal digit.
pub(super) fn valid_ipv6(t: &[u8]) -> bool {
    if !t.iter().any(u8::is_ascii_digit) || t.len() > 39 {
        return false;
    }
    let group_ok = |g: &[u8]| (1..=4).contains(&g.len()) && g.iter().all(u8::is_ascii_hexdigit);
    let groups = |s: &[u8]| -> Option<usize> {
        if s.is_empty() {
            return Some(0);
        }
        let gs: Vec<&[u8]> = s.split(|&b| b == b':').collect();
        gs.iter().all(|g| group_ok(g)).then_some(gs.len())
    };
    match t.windows(2).position(|w| w == b"::") {
        Some(i) => {
            let (head, tail) = (&t[..i], &t[i + 2..]);
            if tail.windows(2).any(|w| w == b"::") {
                return false;
            }
            matches!((groups(head), groups(tail)), (Some(h), Some(l)) if h + l <= 7)
        }
        None => groups(t) == Some(8),
    }
}
