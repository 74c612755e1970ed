//! `pii` / `pii_leakage`: the recognizers of these kinds (all when none is named), scanned as
//! the text streams.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::ScanRules;
use crate::policy::pack::params::Params;
use crate::scan::{PiiKind, PiiRule};

pub(in crate::policy) struct PiiType;
pub(in crate::policy) const PII: PiiType = PiiType;

impl CheckType for PiiType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        &[("entities", "types")]
    }

    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let kinds = match p.string_list("types")? {
            None => Vec::new(),
            Some(names) => names
                .iter()
                .map(|n| {
                    PiiKind::parse(n).ok_or_else(|| {
                        let known: Vec<&str> = PiiKind::ALL.iter().map(|k| k.name()).collect();
                        format!(
                            "param 'types': unknown kind `{n}` (known: {})",
                            known.join(", ")
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(CheckDef::new(Pii { kinds }))
    }
}

#[derive(Debug)]
struct Pii {
    kinds: Vec<PiiKind>,
}

impl Check for Pii {
    fn kind(&self) -> Kind {
        Kind::Streamed
    }

    fn compile_scan(&self, rules: &mut ScanRules) -> Result<(), String> {
        rules.pii.push(PiiRule {
            kinds: self.kinds.clone(),
            owner: rules.owner,
        });
        Ok(())
    }
}
