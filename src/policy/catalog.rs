//! The PromptKit check catalog: every type name and alias a pack may use.
//!
//! Types guardwire implements are built by [`super::pack`]; the others are known (so a pack that
//! uses them gets "not supported yet", not "unknown type") and refused at load — never passed.

/// (canonical name, aliases). Order follows the PromptKit "Checks Reference".
pub const CATALOG: &[(&str, &[&str])] = &[
    ("contains", &["content_includes"]),
    ("regex", &["content_matches"]),
    (
        "content_excludes",
        &["banned_words", "content_not_includes"],
    ),
    ("contains_any", &["content_includes_any"]),
    ("min_length", &[]),
    ("max_length", &["length"]),
    ("sentence_count", &["max_sentences"]),
    ("field_presence", &["required_fields"]),
    ("cosine_similarity", &[]),
    ("json_valid", &["is_valid_json", "valid_json"]),
    ("json_schema", &[]),
    ("json_path", &[]),
    ("tools_called", &["tool_called"]),
    ("tools_not_called", &[]),
    ("tool_args", &[]),
    ("tool_calls_with_args", &[]),
    ("tool_call_count", &[]),
    ("tool_call_sequence", &[]),
    ("tool_call_chain", &[]),
    ("tool_anti_pattern", &[]),
    ("tool_no_repeat", &[]),
    ("tool_efficiency", &[]),
    ("no_tool_errors", &[]),
    ("tool_result_includes", &[]),
    ("tool_result_matches", &[]),
    ("tool_result_has_media", &[]),
    ("tool_result_media_type", &[]),
    (
        "tool_args_excluded_session",
        &["tools_not_called_with_args"],
    ),
    ("agent_invoked", &[]),
    ("agent_not_invoked", &[]),
    ("agent_response_contains", &[]),
    ("skill_activated", &[]),
    ("skill_not_activated", &[]),
    ("skill_activation_order", &[]),
    ("workflow_complete", &[]),
    // PromptKit registers these two as `state_is` and `transitioned_to`.
    ("workflow_state_is", &["state_is"]),
    ("workflow_transitioned_to", &["transitioned_to"]),
    ("workflow_transition_order", &[]),
    ("workflow_tool_access", &[]),
    ("image_format", &[]),
    ("image_dimensions", &[]),
    ("audio_format", &[]),
    ("audio_duration", &[]),
    ("video_duration", &[]),
    ("video_resolution", &[]),
    ("llm_judge", &[]),
    ("llm_judge_session", &["llm_judge_conversation"]),
    ("llm_judge_tool_calls", &[]),
    ("rest_eval", &[]),
    ("rest_eval_session", &[]),
    ("a2a_eval", &[]),
    ("a2a_eval_session", &[]),
    ("latency_budget", &[]),
    ("cost_budget", &[]),
    ("guardrail_triggered", &[]),
    ("invariant_fields_preserved", &[]),
    ("outcome_equivalent", &[]),
    ("directional", &[]),
    ("pii", &["pii_leakage"]),
    // guardwire's own: RAG checks (HoloDeck's and DeepEval's metrics) on the context the
    // request carries.
    ("faithfulness", &[]),
    ("answer_relevancy", &[]),
];

/// The canonical name of a type name or alias, if the catalog knows it.
pub fn canonical(type_name: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .find(|(name, aliases)| *name == type_name || aliases.contains(&type_name))
        .map(|(name, _)| *name)
}

/// Param aliases of a canonical type: (alias, canonical param).
pub fn param_aliases(canonical: &str) -> &'static [(&'static str, &'static str)] {
    match canonical {
        "content_excludes" => &[("words", "patterns")],
        "max_length" => &[("max_characters", "max"), ("max_chars", "max")],
        "min_length" => &[("min_characters", "min"), ("min_chars", "min")],
        "sentence_count" => &[("max_sentences", "max")],
        "field_presence" => &[("required_fields", "fields")],
        "pii" => &[("entities", "types")],
        // The catalog's names, then PromptKit's handlers'.
        "agent_invoked" | "agent_not_invoked" => &[("agents", "agent_names")],
        "agent_response_contains" => &[("agent", "agent_name"), ("contains", "patterns")],
        _ => &[],
    }
}
