use super::*;
use crate::delta::Message;

#[test]
fn a_turn_past_the_queue_bytes_is_dropped_and_counted() {
    let config = EvalsConfig {
        max_queue_bytes: 1000,
        ..EvalsConfig::default()
    };
    let queue = EvalQueue::new(config, Arc::new(Metrics::new()), None);
    let first = queue.take_bytes(600);
    assert!(first.is_some());
    assert!(queue.take_bytes(600).is_none(), "600 + 600 > 1000");
    assert_eq!(queue.metrics.evals.dropped.get(), 1);
    // Bytes come back once the first turn is evaluated (its share dropped).
    drop(first);
    assert!(queue.take_bytes(600).is_some());
    assert_eq!(queue.metrics.evals.dropped.get(), 1);
}

#[test]
fn a_turn_weighs_its_text() {
    let c = Conversation {
        messages: vec![
            Message::text(Role::System, vec!["be kind".into()]),
            Message::text(Role::User, vec!["hello".into(), "there".into()]),
        ],
        ..Default::default()
    };
    assert_eq!(text_bytes(&c, None), 7 + 5 + 5);
    let answer = Answer {
        text: "hi!".into(),
        tool_calls: vec![("f".into(), "{}".into())],
    };
    assert_eq!(text_bytes(&c, Some(&answer)), 17 + 3 + 1 + 2);
}

#[test]
fn fnv1a_matches_the_reference_values() {
    // Reference values of 64-bit FNV-1a.
    let mut h = Fnv1a::new();
    h.write(b"");
    assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
    let mut h = Fnv1a::new();
    h.write(b"a");
    assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
    let mut h = Fnv1a::new();
    h.write(b"foobar");
    assert_eq!(h.0, 0x8594_4171_f739_67e8);
}

#[test]
fn sampling_is_stable_and_close_to_the_percentage() {
    assert!(!sampled("s", 0, 0.0));
    assert!(sampled("s", 0, 100.0));
    let hits = (0..10_000)
        .filter(|i| sampled(&format!("session-{i}"), 3, 5.0))
        .count();
    assert!((350..650).contains(&hits), "{hits} of 10000 at 5%");
    for i in 0..100 {
        let s = format!("session-{i}");
        assert_eq!(sampled(&s, i, 30.0), sampled(&s, i, 30.0));
    }
}

#[test]
fn a_session_is_its_header_else_its_opening() {
    let opening = |later: &str| Conversation {
        messages: vec![
            Message::text(Role::System, vec!["be kind".into()]),
            Message::text(Role::User, vec!["hello".into()]),
            Message::text(Role::Assistant, vec![later.into()]),
        ],
        ..Default::default()
    };
    assert_eq!(session_of(Some("abc"), &opening("x")), "abc");
    // A long id is kept by its hash: the same for the same id, bounded whatever its size.
    let long = "c".repeat(1 << 20);
    let kept = session_of(Some(&long), &opening("x"));
    assert!(kept.starts_with("sha256:") && kept.len() == 71, "{kept}");
    assert_eq!(kept, session_of(Some(&long), &opening("y")));
    assert_ne!(kept, session_of(Some(&long[1..]), &opening("x")));
    let a = session_of(None, &opening("x"));
    assert_eq!(
        a,
        session_of(Some(""), &opening("y")),
        "later messages do not change it"
    );
    let mut other = opening("x");
    other.messages[1].text[0] = "hi".into();
    assert_ne!(a, session_of(None, &other));
    assert_eq!(turn_index_of(&opening("x")), 1);
}
#[test]
#[allow(clippy::unwrap_used)]
fn a_reference_metric_scores_against_the_pack_or_the_request() {
    use crate::policy::evals::{ReferenceCheck, References};
    use crate::policy::judged::ContextSource;
    use crate::scoring::text::{RougeVariant, TextMetric};
    let conversation = Arc::new(Conversation {
        messages: vec![
            Message::text(Role::System, vec!["The car is blue.".into()]),
            Message::text(Role::User, vec!["What colour is the car?".into()]),
        ],
        ..Default::default()
    });
    let rouge1 = TextMetric::Rouge {
        variant: RougeVariant::Rouge1,
        stemmer: false,
    };
    let from = |roles: &[&str]| ReferenceCheck {
        metric: rouge1.clone(),
        references: References::Request(ContextSource {
            tools: None,
            roles: roles.iter().map(|r| r.to_string()).collect(),
            names: Vec::new(),
        }),
    };
    // rouge1 of "the car is red" against "the car is blue": 3 of 4 words each way.
    let s = score_reference(&from(&["system"]), &conversation, "The car is red.").unwrap();
    assert!((s.value - 0.75).abs() < 1e-9, "{s:?}");
    assert_eq!(detail_line(&s.detail[..1]), "rouge1 0.7500");
    // Several messages: the best one (rouge-score's score_multi).
    let s = score_reference(&from(&["user", "system"]), &conversation, "The car is red.").unwrap();
    assert!((s.value - 0.75).abs() < 1e-9, "{s:?}");
    // Nothing selected: no score, an error saying why (never a pass).
    let e = score_reference(&from(&["tool"]), &conversation, "x").unwrap_err();
    assert!(e.contains("no reference"), "{e}");
    let fixed = ReferenceCheck {
        metric: TextMetric::Bleu,
        references: References::Fixed(vec!["The car is red.".into()]),
    };
    let s = score_reference(&fixed, &conversation, "The car is red.").unwrap();
    assert!((s.value - 1.0).abs() < 1e-9, "{s:?}");
}
