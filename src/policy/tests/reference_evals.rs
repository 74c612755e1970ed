//! `bleu`, `rouge`, `meteor` as pack eval types: params, thresholds and every refusal at load.

use super::*;
use crate::policy::evals::{EvalCheck, References};
use crate::scoring::text::{RougeVariant, TextMetric};

fn eval_pack(ty: &str, params: &str) -> String {
    format!("evals:\n  - {{id: m, type: {ty}, trigger: every_turn, params: {params}}}\n")
}

fn with_wordnet(dir: &std::path::Path) -> judged::CheckRefs {
    judged::CheckRefs {
        wordnet_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn reference_metrics_load_as_evals_with_holodecks_params() {
    let p = policy(&eval_pack(
        "bleu",
        "{reference: [The car is red., A red car.]}",
    ))
    .unwrap();
    let e = &p.evals()[0];
    let EvalCheck::Reference(r) = &e.check else {
        panic!("{:?}", e.check)
    };
    assert!(matches!(r.metric, TextMetric::Bleu));
    assert_eq!(
        r.references,
        References::Fixed(vec!["The car is red.".into(), "A red car.".into()])
    );
    // Passes at 0.5 unless told otherwise (as `guardwire eval --metric bleu`).
    assert!(e.passes(0.5) && !e.passes(0.49));
    // HoloDeck's `threshold` and `ground_truth`, rouge-score's `use_stemmer`.
    let p = policy(&eval_pack(
        "rouge",
        "{ground_truth: x, threshold: 0.3, variant: rouge2, use_stemmer: true}",
    ))
    .unwrap();
    let e = &p.evals()[0];
    let EvalCheck::Reference(r) = &e.check else {
        panic!()
    };
    assert!(matches!(
        r.metric,
        TextMetric::Rouge {
            variant: RougeVariant::Rouge2,
            stemmer: true
        }
    ));
    assert!(e.passes(0.3) && !e.passes(0.29));
    // The references may come from the request's messages, as faithfulness's context does.
    let p = policy(&eval_pack("rouge", "{context_roles: [user]}")).unwrap();
    let EvalCheck::Reference(r) = &p.evals()[0].check else {
        panic!()
    };
    assert!(matches!(
        r.metric,
        TextMetric::Rouge {
            variant: RougeVariant::RougeL,
            stemmer: false
        }
    ));
    let References::Request(source) = &r.references else {
        panic!()
    };
    assert_eq!(source.roles, ["user"]);
    // METEOR, on the configured WordNet.
    let wordnet = crate::scoring::tests::tiny_wordnet();
    let p = policy_with(
        &eval_pack("meteor", "{reference: The auto is red.}"),
        &with_wordnet(wordnet.path()),
    )
    .unwrap();
    let EvalCheck::Reference(r) = &p.evals()[0].check else {
        panic!()
    };
    let s = r
        .metric
        .score("The car is red.", &["The auto is red."], "reference")
        .unwrap();
    assert!((s.value - 0.9921875).abs() < 1e-9, "{}", s.value);
}

#[test]
fn what_a_reference_metric_cannot_do_is_refused_at_load() {
    for (ty, params, want) in [
        ("bleu", "{}", "param 'reference': required"),
        ("bleu", "{reference: x, context_roles: [user]}", "not both"),
        (
            "bleu",
            "{reference: \"  \"}",
            "param 'reference': entry 0 is empty",
        ),
        ("bleu", "{reference: []}", "a non-empty list"),
        ("bleu", "{reference: [x, 3]}", "entry 1 must be a string"),
        (
            "bleu",
            "{reference: x, variant: rouge1}",
            "param 'variant': unknown param for `bleu`",
        ),
        (
            "rouge",
            "{reference: x, variant: rougeLsum}",
            "rouge1, rouge2, rougeL",
        ),
        (
            "rouge",
            "{reference: x, use_stemmer: yes please}",
            "param 'use_stemmer'",
        ),
        (
            "rouge",
            "{reference: x, refrence: y}",
            "param 'refrence': unknown param",
        ),
        ("rouge", "{context_roles: [robot]}", "param 'context_roles'"),
        (
            "bleu",
            "{reference: x, direction: input}",
            "direction: output",
        ),
        ("bleu", "{reference: x, min_score: 1.5}", "min_score"),
    ] {
        let e = policy(&eval_pack(ty, params)).unwrap_err();
        assert!(e.contains(want), "{ty} {params}: {e}");
        assert!(
            e.contains("test.yaml") && e.contains(&format!("evals[0] (type: {ty})")),
            "{e}"
        );
    }
    let long = "a".repeat(crate::scoring::text::MAX_SCORED_CHARS + 1);
    let e = policy(&eval_pack("bleu", &format!("{{reference: {long}}}"))).unwrap_err();
    assert!(e.contains("over the 16384"), "{e}");
    // Evals only: as a validator, refused.
    let e = policy("validators:\n  - {type: rouge, params: {reference: x}}\n").unwrap_err();
    assert!(
        e.contains("validators[0] (type: rouge)") && e.contains("applies to `evals:`"),
        "{e}"
    );
    // METEOR without a readable WordNet: refused, naming the file, the eval and the key.
    let empty = tempfile::tempdir().unwrap();
    let e = policy_with(
        &eval_pack("meteor", "{reference: x}"),
        &with_wordnet(empty.path()),
    )
    .unwrap_err();
    assert!(
        e.contains("test.yaml")
            && e.contains("evals[0] (type: meteor)")
            && e.contains("METEOR needs WordNet 3.0")
            && e.contains("evals.wordnet_dir"),
        "{e}"
    );
    // A disabled METEOR eval is still checked (as any disabled eval).
    let e = policy_with(
        "evals:\n  - {id: m, type: meteor, trigger: every_turn, enabled: false, params: {reference: x}}\n",
        &with_wordnet(empty.path()),
    )
    .unwrap_err();
    assert!(e.contains("METEOR needs WordNet"), "{e}");
}
