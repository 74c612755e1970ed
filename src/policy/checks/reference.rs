//! `bleu`, `rouge`, `meteor` (evals only; guardwire's own types, HoloDeck's NLP metrics): the
//! answer scored against a reference by [`crate::scoring::text`] — the scorer `guardwire eval
//! --metric` uses. A live turn has no expected output, so the pack says where the reference is:
//! `reference` (a text, or a list of texts) or the request's messages that `context_tools`,
//! `context_roles` or `context_names` select (each one reference, as `faithfulness` selects its
//! context). `rouge` takes `variant` and `use_stemmer`; `meteor` loads WordNet 3.0 from the
//! config's `evals.wordnet_dir` when the pack is loaded, and a pack asking for it without a
//! readable WordNet is refused.

use super::judged::context_source;
use super::{Check, CheckDef, CheckType, Kind, Named};
use crate::policy::evals::{EvalCheck, ReferenceCheck, References};
use crate::policy::pack::params::Params;
use crate::scoring::meteor::Meteor;
use crate::scoring::text::{self, RougeVariant, TextMetric};
use serde_json::Value;
use std::sync::Arc;

pub(in crate::policy) struct ReferenceType;
pub(in crate::policy) const REFERENCE: ReferenceType = ReferenceType;

/// The score a reference metric passes at unless the eval says otherwise (`guardwire eval`'s
/// default too).
pub(in crate::policy) const DEFAULT_MIN_SCORE: f64 = 0.5;

impl CheckType for ReferenceType {
    fn param_aliases(&self, _canonical: &str) -> &'static [(&'static str, &'static str)] {
        // HoloDeck's names: `threshold` (the score to reach), `ground_truth` (the reference).
        &[("threshold", "min_score"), ("ground_truth", "reference")]
    }

    fn build(&self, ty: &Named, p: &mut Params) -> Result<CheckDef, String> {
        let fixed = match p.take("reference") {
            None => None,
            Some((key, v)) => Some(reference_texts(&key, v)?),
        };
        let source = context_source(p)?;
        let from_request =
            source.tools.is_some() || !source.roles.is_empty() || !source.names.is_empty();
        let references = match (fixed, from_request) {
            (Some(texts), false) => References::Fixed(texts),
            (None, true) => References::Request(source),
            (Some(_), true) => {
                return Err(
                    "param 'reference': a fixed reference or context_tools/context_roles/context_names, not both"
                        .into(),
                )
            }
            (None, false) => {
                return Err(
                    "param 'reference': required (the reference text, or a list of them), or context_tools/context_roles/context_names to take the references from the request's messages (a live turn has no expected output)"
                        .into(),
                )
            }
        };
        let metric = match ty.canonical {
            "bleu" => TextMetric::Bleu,
            "rouge" => {
                let variant = match p.string("variant")? {
                    None => RougeVariant::RougeL,
                    Some(v) => RougeVariant::by_name(&v).ok_or_else(|| {
                        format!("param 'variant': `{v}` is not one of rouge1, rouge2, rougeL")
                    })?,
                };
                TextMetric::Rouge {
                    variant,
                    stemmer: p.bool("use_stemmer")?.unwrap_or(false),
                }
            }
            "meteor" => {
                let dir = ty
                    .refs
                    .wordnet_dir
                    .as_deref()
                    .unwrap_or_else(|| Meteor::default_dir());
                let m = text::shared_meteor(dir).map_err(|e| {
                    format!("{e} (the config's evals.wordnet_dir: {})", dir.display())
                })?;
                TextMetric::Meteor(m)
            }
            other => return Err(format!("`{other}` is not a reference text metric")),
        };
        Ok(CheckDef::new(Reference(Arc::new(ReferenceCheck {
            metric,
            references,
        }))))
    }
}

/// `reference`: a non-empty text, or a non-empty list of them.
fn reference_texts(key: &str, v: Value) -> Result<Vec<String>, String> {
    let texts = match v {
        Value::String(s) => vec![s],
        Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s),
                _ => Err(format!("param '{key}': entry {i} must be a string")),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(format!(
                "param '{key}': a text, or a non-empty list of texts"
            ))
        }
    };
    if texts.len() > text::MAX_REFERENCES {
        return Err(format!(
            "param '{key}': {} references, over the {} a score is taken against",
            texts.len(),
            text::MAX_REFERENCES
        ));
    }
    if let Some(i) = texts.iter().position(|t| t.trim().is_empty()) {
        return Err(format!("param '{key}': entry {i} is empty"));
    }
    if let Some(t) = texts
        .iter()
        .find(|t| t.chars().count() > text::MAX_SCORED_CHARS)
    {
        return Err(format!(
            "param '{key}': a reference of {} characters, over the {} a reference text metric scores",
            t.chars().count(),
            text::MAX_SCORED_CHARS
        ));
    }
    Ok(texts)
}

#[derive(Debug)]
struct Reference(Arc<ReferenceCheck>);

impl Check for Reference {
    fn kind(&self) -> Kind {
        Kind::EvalOnly
    }

    fn eval(&self) -> Option<EvalCheck> {
        Some(EvalCheck::Reference(Arc::clone(&self.0)))
    }
}
