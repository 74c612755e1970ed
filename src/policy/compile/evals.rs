//! A pack's evals as read ([`EvalDef`]: the eval's own fields and its validator's check), and
//! compiling them into a policy's [`Eval`]s.

use super::super::checks::CheckDef;
use super::super::compiled::Policy;
use super::super::evals::{Eval, EvalCheck, EvalHead};
use super::super::types::{Direction, Mode, PolicyError, Validator};
use std::sync::Arc;

/// The check definition of an eval, before it is compiled.
#[derive(Debug, Clone)]
pub struct EvalDef {
    pub eval: EvalHead,
    pub validator: Validator,
    pub check: CheckDef,
}

/// Compiles a policy's evals: ids unique, one metric name one kind and one label set, each
/// deterministic check compiled alone.
pub(super) fn compile(defs: Vec<EvalDef>) -> Result<Vec<Eval>, PolicyError> {
    let mut out: Vec<Eval> = Vec::with_capacity(defs.len());
    for def in defs {
        let v = &def.validator;
        let fail = |message: String| PolicyError::Compile {
            file: v.file.clone(),
            index: v.index,
            type_name: v.type_name.clone(),
            message,
        };
        if out.iter().any(|e| e.id == def.eval.id) {
            return Err(fail(format!(
                "`id`: another eval of this policy is `{}` (ids label metrics: they must be unique)",
                def.eval.id
            )));
        }
        if let Some(m) = &def.eval.metric {
            let clash = out.iter().filter_map(|e| e.metric.as_ref()).find(|o| {
                o.name == m.name
                    && (o.kind != m.kind
                        || o.labels
                            .iter()
                            .map(|l| &l.0)
                            .ne(m.labels.iter().map(|l| &l.0)))
            });
            if clash.is_some() {
                return Err(fail(format!(
                    "`metric.name`: `{}` is another eval's metric with another type or label names",
                    m.name
                )));
            }
        }
        let transcript = (def.validator.direction == Direction::Output)
            .then(|| def.check.check().transcript())
            .flatten();
        let check = match def.check.check().eval() {
            Some(check) => check,
            None => {
                // Run as an enforcing validator: its verdict is the phases' `Err`.
                let mut alone = def.validator.clone();
                alone.mode = Mode::Enforce;
                alone.buffer = false;
                let replay = Arc::new(Policy::compile(vec![(alone, def.check)])?);
                match transcript {
                    Some(rule) => EvalCheck::Transcript(Arc::new(rule), replay),
                    None => EvalCheck::Replay(replay),
                }
            }
        };
        // The eval's `threshold` decides when it sets a score bound; else the params'.
        let threshold = def
            .eval
            .threshold
            .filter(|t| t.min_score.is_some() || t.max_score.is_some())
            .unwrap_or(def.validator.threshold);
        out.push(Eval {
            id: def.eval.id,
            trigger: def.eval.trigger,
            when: def.eval.when,
            metric: def.eval.metric,
            threshold,
            expect_passed: def.eval.expect_passed,
            validator: def.validator,
            check,
        });
    }
    Ok(out)
}
