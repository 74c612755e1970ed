//! `cost_budget`: the usage stays within token counts (in, out, both) and a price.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::{CostLimits, Policy};
use crate::policy::pack::params::Params;
use crate::policy::Validator;

pub(in crate::policy) struct CostBudgetType;
pub(in crate::policy) const COST_BUDGET: CostBudgetType = CostBudgetType;

impl CheckType for CostBudgetType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let limits = CostLimits {
            max_input_tokens: p.u64("max_input_tokens")?,
            max_output_tokens: p.u64("max_output_tokens")?,
            max_total_tokens: p.u64("max_total_tokens")?,
            max_cost_usd: p.non_negative("max_cost_usd")?,
        };
        if limits.max_input_tokens.is_none()
            && limits.max_output_tokens.is_none()
            && limits.max_total_tokens.is_none()
            && limits.max_cost_usd.is_none()
        {
            return Err("param 'max_cost_usd', 'max_total_tokens', 'max_input_tokens' or 'max_output_tokens': at least one is required".into());
        }
        Ok(CheckDef::new(CostBudget { limits }))
    }
}

#[derive(Debug)]
struct CostBudget {
    limits: CostLimits,
}

impl Check for CostBudget {
    fn kind(&self) -> Kind {
        Kind::Exchange
    }

    fn compile_exchange(&self, owner: u32, _: &Validator, policy: &mut Policy) {
        policy.cost.push((owner, self.limits));
    }
}
