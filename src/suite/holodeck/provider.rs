//! HoloDeck's `LLMProvider` (the agent's model and the evaluations' judges) as a run reads
//! it: its validation, the protocol it is sent in, and the config's judge it names.

use serde::Deserialize;
use serde_norway::Value as Yaml;

/// HoloDeck's `LLMProvider`.
#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub provider: String,
    pub name: String,
    #[serde(default = "default_temperature")]
    pub temperature: Option<f64>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    endpoint: Option<String>,
    // The keys and versions of HoloDeck's own clients: a run uses the config's upstream.
    #[serde(default)]
    #[allow(dead_code)]
    api_key: Option<Yaml>,
    #[serde(default)]
    #[allow(dead_code)]
    api_version: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    auth_provider: Option<Yaml>,
}

fn default_temperature() -> Option<f64> {
    Some(0.3)
}

fn default_max_tokens() -> Option<i64> {
    Some(1000)
}

/// The judges a run may use: name and model of each `judges:` entry of the config.
pub struct Judges<'a>(pub Vec<(&'a str, &'a str)>);

impl Judges<'_> {
    /// The judge for a HoloDeck `model` (by model name); `None` when no model is named (the
    /// config's only judge then).
    pub(super) fn for_model(
        &self,
        model: Option<&Provider>,
        key: &str,
    ) -> Result<Option<String>, String> {
        let Some(m) = model else { return Ok(None) };
        match self.0.iter().find(|(_, model)| *model == m.name) {
            Some((name, _)) => Ok(Some((*name).to_owned())),
            None => Err(format!(
                "{key}: model {:?} is no judge's model in the config (judges: {}); add a judges: entry with model: {:?}",
                m.name,
                if self.0.is_empty() {
                    "none".to_owned()
                } else {
                    self.0
                        .iter()
                        .map(|(n, m)| format!("{n} ({m})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                m.name
            )),
        }
    }
}

/// HoloDeck's `LLMProvider` validation.
pub(super) fn check_provider(p: &Provider, key: &str) -> Result<(), String> {
    protocol_of(p, &format!("{key}.provider"))?;
    if p.name.trim().is_empty() {
        return Err(format!("{key}.name: name must be a non-empty string"));
    }
    if p.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(format!(
            "{key}.temperature: temperature must be between 0.0 and 2.0"
        ));
    }
    if p.max_tokens.is_some_and(|m| m <= 0) {
        return Err(format!("{key}.max_tokens: max_tokens must be positive"));
    }
    if p.top_p.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return Err(format!("{key}.top_p: top_p must be between 0.0 and 1.0"));
    }
    if p.provider == "azure_openai" && p.endpoint.as_deref().is_none_or(|e| e.trim().is_empty()) {
        return Err(format!(
            "{key}.endpoint: endpoint is required for azure_openai provider"
        ));
    }
    Ok(())
}

pub(super) fn protocol_of(p: &Provider, key: &str) -> Result<&'static str, String> {
    match p.provider.as_str() {
        "openai" | "azure_openai" | "ollama" => Ok("openai_chat"),
        "anthropic" => Ok("anthropic_messages"),
        other => Err(format!(
            "{key}: {other:?} is not one of openai, azure_openai, anthropic, ollama"
        )),
    }
}
