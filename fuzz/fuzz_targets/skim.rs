//! The skim reader (`protocol::skim`) against serde_json: "never more lenient than serde_json;
//! whatever it accepts is JSON that serde_json accepts with the same values".
//!
//! Input: byte 0's low 4 bits = `n`, then `n` choice bytes, then the JSON text. The text is read
//! twice with the skim reader:
//! - whole with `skip` then `end`;
//! - value by value with the typed readers (`object`, `array`, `str`, `opt_str`, `u64`, `u32`,
//!   `opt_u64`, `null`, `skip`), each value's reader picked by the next choice byte: when
//!   serde_json accepts the text, following its value's type (or `skip`), else a guess.
//!
//! Asserts: whenever skim accepts the whole text, serde_json accepts it (as `IgnoredAny`, which
//! is how serde_json treats the values skim skips; as a `Value` when nothing was skipped), and
//! every string, key, integer and null skim read equals serde_json's value there (with
//! serde_json's rule for a repeated key: the last one counts).
#![no_main]

use guardwire::protocol::skim::{Skim, Skimmed, Unsure};
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

/// What the typed reading found.
#[derive(Debug)]
enum Got {
    Skipped,
    Null,
    Str(String),
    U64(u64),
    Obj(Vec<(String, Got)>),
    Arr(Vec<Got>),
}

#[derive(Clone, Copy)]
enum Kind {
    Skip,
    Null,
    Str,
    OptStr,
    U64,
    U32,
    OptU64,
    Object,
    Array,
}

const GUESSES: [Kind; 9] = [
    Kind::Skip,
    Kind::Null,
    Kind::Str,
    Kind::OptStr,
    Kind::U64,
    Kind::U32,
    Kind::OptU64,
    Kind::Object,
    Kind::Array,
];

struct Reader<'c> {
    choices: &'c [u8],
    next: usize,
    skipped: bool,
}

impl Reader<'_> {
    fn choice(&mut self) -> u8 {
        if self.choices.is_empty() {
            return 0;
        }
        let c = self.choices[self.next % self.choices.len()];
        self.next += 1;
        c
    }

    fn kind(&mut self, expected: Option<&Value>) -> Kind {
        let c = self.choice();
        match expected {
            Some(v) if c & 0x80 == 0 => match v {
                Value::Null => [Kind::Null, Kind::OptStr, Kind::OptU64][usize::from(c % 3)],
                Value::String(_) => [Kind::Str, Kind::OptStr][usize::from(c % 2)],
                Value::Number(n) if n.is_u64() => {
                    [Kind::U64, Kind::U32, Kind::OptU64][usize::from(c % 3)]
                }
                Value::Object(_) => Kind::Object,
                Value::Array(_) => Kind::Array,
                _ => Kind::Skip,
            },
            Some(_) => Kind::Skip,
            None => GUESSES[usize::from(c) % GUESSES.len()],
        }
    }

    fn read<'a>(&mut self, s: &mut Skim<'a>, expected: Option<&Value>) -> Skimmed<Got> {
        Ok(match self.kind(expected) {
            Kind::Skip => {
                self.skipped = true;
                s.skip()?;
                Got::Skipped
            }
            Kind::Null => {
                if !s.null() {
                    return Err(Unsure);
                }
                Got::Null
            }
            Kind::Str => Got::Str(s.str()?.into_owned()),
            Kind::OptStr => s.opt_str()?.map_or(Got::Null, |t| Got::Str(t.into_owned())),
            Kind::U64 => Got::U64(s.u64()?),
            Kind::U32 => Got::U64(u64::from(s.u32()?)),
            Kind::OptU64 => s.opt_u64()?.map_or(Got::Null, Got::U64),
            Kind::Object => {
                let mut members = Vec::new();
                s.object(|s, key| {
                    let key = std::str::from_utf8(key).expect("skim keys are UTF-8");
                    let value = self.read(s, expected.and_then(|v| v.get(key)))?;
                    members.push((key.to_owned(), value));
                    Ok(())
                })?;
                Got::Obj(members)
            }
            Kind::Array => {
                let mut items = Vec::new();
                s.array(|s| {
                    let at = items.len();
                    items.push(self.read(s, expected.and_then(|v| v.get(at)))?);
                    Ok(())
                })?;
                Got::Arr(items)
            }
        })
    }
}

/// `got` is what serde_json read as `v` (skipped values match anything).
fn same(got: &Got, v: &Value) -> bool {
    match (got, v) {
        (Got::Skipped, _) => true,
        (Got::Null, Value::Null) => true,
        (Got::Str(a), Value::String(b)) => a == b,
        (Got::U64(a), Value::Number(b)) => b.as_u64() == Some(*a),
        (Got::Arr(items), Value::Array(values)) => {
            items.len() == values.len() && items.iter().zip(values).all(|(g, v)| same(g, v))
        }
        (Got::Obj(members), Value::Object(map)) => {
            members.iter().all(|(k, _)| map.contains_key(k))
                && map.iter().all(|(k, v)| {
                    members
                        .iter()
                        .rev()
                        .find(|(key, _)| key == k)
                        .is_some_and(|(_, g)| same(g, v))
                })
        }
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(head & 15).min(rest.len());
    let (choices, json) = rest.split_at(n);
    let ignored_ok = serde_json::from_slice::<IgnoredAny>(json).is_ok();
    let value = serde_json::from_slice::<Value>(json).ok();

    let mut s = Skim::new(json);
    if s.skip().and_then(|()| s.end()).is_ok() {
        assert!(ignored_ok, "skim skips what serde_json refuses");
    }

    let mut reader = Reader {
        choices,
        next: 0,
        skipped: false,
    };
    let mut s = Skim::new(json);
    let Ok(got) = reader
        .read(&mut s, value.as_ref())
        .and_then(|g| s.end().map(|()| g))
    else {
        return;
    };
    assert!(ignored_ok, "skim reads what serde_json refuses: {got:?}");
    if !reader.skipped {
        assert!(
            value.is_some(),
            "skim reads as values what serde_json refuses: {got:?}"
        );
    }
    if let Some(v) = &value {
        assert!(same(&got, v), "skim read {got:?}, serde_json {v:?}");
    }
});
