#![allow(clippy::unwrap_used)]
use super::*;

const HEAD: &str =
    "apiVersion: promptkit.altairalabs.ai/v1alpha1\nkind: Scenario\nmetadata: {name: t}\n";

#[test]
fn what_cannot_run_is_refused_naming_file_and_key() {
    let err = |spec: &str| parse("s.yaml", &format!("{HEAD}{spec}")).err().unwrap();
    let e = err("spec:\n  fixtures: {a: 1}\n  turns: [{role: user, content: hi}]\n");
    assert!(e.starts_with("s.yaml: spec.fixtures:"), "{e}");
    let e = err("spec:\n  turns: [{role: assistant, content: hi}]\n");
    assert!(e.contains("spec.turns[0].role"), "{e}");
    let e = err("spec:\n  turns: [{role: user, parts: []}]\n");
    assert!(e.contains("spec.turns[0].parts"), "{e}");
    let e = err("spec:\n  turns:\n    - role: user\n      content: hi\n      assertions: [{type: llm_judge, params: {criteria: x, judge: j}}]\n");
    assert!(e.contains("spec.turns[0].assertions[0]"), "{e}");
    // Judged assertions naming a judge of the config are read (and run on it).
    let refs = CheckRefs {
        judges: ["j".to_owned()].into_iter().collect(),
        ..CheckRefs::default()
    };
    let judged = format!("{HEAD}spec:\n  turns:\n    - role: user\n      content: hi\n      assertions: [{{type: llm_judge, params: {{criteria: x, judge: j}}}}]\n");
    let s = parse_with("s.yaml", &judged, &refs).unwrap();
    assert!(matches!(
        s.turns[0].assertions.policy.evals()[0].check,
        EvalCheck::Judged(_)
    ));
    let e = err("spec:\n  turns:\n    - role: user\n      content: hi\n      assertions: [{type: image_format, params: {formats: [png]}}]\n");
    assert!(e.contains("spec.turns[0].assertions[0]"), "{e}");
    let e = err("spec:\n  turns:\n    - role: user\n      content: hi\n      assertions: [{type: contains, params: {patternz: [x]}}]\n");
    assert!(
        e.contains("spec.turns[0].assertions[0]") && e.contains("param 'patterns'"),
        "{e}"
    );
    let e = parse("s.yaml", "kind: Arena\nspec: {}\n").err().unwrap();
    assert!(e.contains("kind"), "{e}");
    let ok = parse(
        "s.yaml",
        &format!("{HEAD}spec:\n  task_type: support\n  turns:\n    - role: user\n      content: hi\n      assertions:\n        - type: content_includes\n          params: {{patterns: [hello], message: greets}}\n"),
    )
    .unwrap();
    assert_eq!(
        ok.turns[0].assertions.written[0],
        ("content_includes".into(), Some("greets".into()))
    );
}
