#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn parameters_are_checked_before_any_case_runs() {
    let text = "{\"id\":\"a\",\"input\":\"hi\",\"actual_output\":\"hello\",\"expected_output\":\"hello\"}\n\
                {\"id\":\"b\",\"input\":\"hi\",\"actual_output\":\"hello\"}\n\
                {\"id\":\"c\",\"input\":\"hi\"}\n";
    let errors = read_all(text, &[Metric::Equals]).err().unwrap();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("case \"b\": metric equals needs expected_output"));
    assert!(errors[2].contains("case \"c\": metric equals needs actual_output"));
    assert_eq!(read_all(text, &[]).unwrap().len(), 3);
    let tools = read_all("{\"input\":\"x\",\"expected_tools\":[\"a\",{\"name\":\"b\",\"arguments\":\"{\\\"q\\\":1}\"}]}", &[])
        .unwrap();
    assert_eq!(
        tools[0].expected_tools.as_ref().unwrap()[1].arguments,
        Some(json!({"q": 1}))
    );
    for (line, want) in [
        (
            "{\"input\":\"x\",\"expected_tools\":[3]}",
            "expected_tools[0]: a tool name",
        ),
        (
            "{\"input\":\"x\",\"tool_calls\":[{\"name\":\"a\",\"args\":1}]}",
            "tool_calls[0]: unknown key args",
        ),
        (
            "{\"input\":\"x\",\"tool_calls\":[{\"name\":\"a\",\"arguments\":\"{\"}]}",
            "not JSON",
        ),
        (
            "{\"id\":\"v\",\"input\":\"x\",\"variant_of\":\"nobody\"}",
            "variant_of \"nobody\" names no other case",
        ),
        ("{\"input\":\"x\",\"trajectory\":{\"stepz\":1}}", "unknown"),
    ] {
        let e = read_all(line, &[]).err().unwrap();
        assert!(e[0].contains(want), "{line}: {e:?}");
    }
    // A whole recorded answer's tool calls and usage are read from it.
    let case = &read_all("{\"input\":\"x\",\"response\":{\"id\":\"c\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"t\",\"type\":\"function\",\"function\":{\"name\":\"search\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}}", &[]).unwrap()[0];
    assert_eq!(case.tool_calls.as_ref().unwrap()[0].name, "search");
    assert_eq!(case.trajectory.tokens, Some(7));
    let case = &read_all("{\"input\":[{\"role\":\"user\",\"content\":\"q\"}],\"ground_truth\":\"a\",\"retrieval_context\":[\"c\"]}", &[]).unwrap()[0];
    assert_eq!(case.expected.as_deref(), Some("a"));
    assert!(String::from_utf8_lossy(&case.exchange).contains("\"content\":\"q\""));
}
