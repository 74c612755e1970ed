//! `cost_budget`: the response's usage stays within a token count and a price.

use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::compiled::Policy;
use crate::policy::pack::params::Params;
use crate::policy::Validator;

pub(in crate::policy) struct CostBudgetType;
pub(in crate::policy) const COST_BUDGET: CostBudgetType = CostBudgetType;

impl CheckType for CostBudgetType {
    fn build(&self, _: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let max_total_tokens = p.u64("max_total_tokens")?;
        let max_cost_usd = p.non_negative("max_cost_usd")?;
        if max_total_tokens.is_none() && max_cost_usd.is_none() {
            return Err(
                "param 'max_total_tokens' or 'max_cost_usd': at least one is required".into(),
            );
        }
        Ok(CheckDef::new(CostBudget {
            max_total_tokens,
            max_cost_usd,
        }))
    }
}

#[derive(Debug)]
struct CostBudget {
    max_total_tokens: Option<u64>,
    max_cost_usd: Option<f64>,
}

impl Check for CostBudget {
    fn kind(&self) -> Kind {
        Kind::Exchange
    }

    fn compile_exchange(&self, owner: u32, _: &Validator, policy: &mut Policy) {
        policy
            .cost
            .push((owner, self.max_total_tokens, self.max_cost_usd));
    }
}
