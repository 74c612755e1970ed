//! `guardrail_triggered` (evals only): whether the validator whose type as written or id is
//! `guardrail` fired on the exchange (`should_trigger`), on the request, the answer or either.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::evals::EvalCheck;
use crate::policy::pack::params::Params;

pub(in crate::policy) struct GuardrailTriggeredType;
pub(in crate::policy) const GUARDRAIL_TRIGGERED: GuardrailTriggeredType = GuardrailTriggeredType;

impl CheckType for GuardrailTriggeredType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let guardrail = match p.string("guardrail")? {
            Some(g) => g,
            None => match p.string("validator_type")? {
                Some(g) => g,
                None => p.string("validator")?.ok_or_else(|| {
                    "param 'guardrail': required (the type as written, or the id, of a validator)"
                        .to_owned()
                })?,
            },
        };
        let on_input = match p.string("direction")?.as_deref() {
            None | Some("both") => None,
            Some("input") => Some(true),
            Some("output") => Some(false),
            Some(_) => return Err("param 'direction': must be one of input, output, both".into()),
        };
        Ok(CheckDef::new(GuardrailTriggered {
            guardrail,
            should_trigger: p.bool("should_trigger")?.unwrap_or(true),
            on_input,
        }))
    }
}

/// On the request (`on_input: Some(true)`), the answer (`Some(false)`) or either (`None`).
#[derive(Debug)]
struct GuardrailTriggered {
    guardrail: String,
    should_trigger: bool,
    on_input: Option<bool>,
}

impl Check for GuardrailTriggered {
    fn kind(&self) -> Kind {
        Kind::EvalOnly
    }

    fn eval(&self) -> Option<EvalCheck> {
        Some(EvalCheck::GuardrailTriggered {
            guardrail: self.guardrail.clone(),
            should_trigger: self.should_trigger,
            on_input: self.on_input,
        })
    }
}
