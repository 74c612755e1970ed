//! `latency_budget`: the exchange completes within `max_ms` of the request's arrival.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::Policy;
use crate::policy::pack::params::Params;
use crate::policy::Validator;

pub(in crate::policy) struct LatencyBudgetType;
pub(in crate::policy) const LATENCY_BUDGET: LatencyBudgetType = LatencyBudgetType;

impl CheckType for LatencyBudgetType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        match p.u64("max_ms")? {
            Some(0) => Err("param 'max_ms': must be more than 0".into()),
            Some(max_ms) => match crate::config::check_duration_ms(max_ms) {
                Ok(()) => Ok(CheckDef::new(LatencyBudget { max_ms })),
                Err(e) => Err(format!("param 'max_ms': {e}")),
            },
            None => Err("param 'max_ms': required (milliseconds)".into()),
        }
    }
}

#[derive(Debug)]
struct LatencyBudget {
    max_ms: u64,
}

impl Check for LatencyBudget {
    fn kind(&self) -> Kind {
        Kind::Exchange
    }

    fn compile_exchange(&self, owner: u32, _: &Validator, policy: &mut Policy) {
        policy.latency.push((owner, self.max_ms));
    }
}
