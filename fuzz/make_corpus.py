#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (committed; rerun after changing this).

Seeds are small real examples in each target's input format (see the comment at the top of
each fuzz_targets/*.rs): the wire shapes of tests/common/protocols.rs, and packs cut from
config/packs/. libFuzzer adds what it finds to the first corpus directory it is given, so runs
that should leave the committed corpus alone (tests/run) pass a scratch directory first.
"""

import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")

# Indexes in ProtocolId::ALL (byte 0 of the protocol targets' inputs; taken modulo the number
# of protocols, so with fewer of them a seed just goes to another protocol).
CHAT, RESPONSES, ANTHROPIC, GEMINI, COMPLETIONS, EMBEDDINGS = 0, 1, 2, 3, 4, 5


def js(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def sse(v):
    return f"data: {js(v)}\n\n"


def ev(name, v):
    return f"event: {name}\ndata: {js(v)}\n\n"


# ---- streams, per protocol (tests/common/protocols.rs) ----

def chat_text(texts):
    f = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    f += [sse({"choices": [{"index": 0, "delta": {"content": t}}]}) for t in texts]
    f.append(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}))
    f.append("data: [DONE]\n\n")
    return "".join(f)


def chat_tool(args):
    f = [sse({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]})]
    f += [sse({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": a}}]}}]}) for a in args]
    f.append("data: [DONE]\n\n")
    return "".join(f)


def chat_thinking(think, text):
    return (sse({"choices": [{"index": 0, "delta": {"reasoning_content": think}}]})
            + sse({"choices": [{"index": 0, "delta": {"refusal": text}}]})
            + "data: [DONE]\n\n")


def responses_text(texts):
    f = [ev("response.created", {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress", "output": []}}),
         ev("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "message", "id": "m", "role": "assistant", "content": []}})]
    f += [ev("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2 + i, "item_id": "m", "output_index": 0, "content_index": 0, "delta": t}) for i, t in enumerate(texts)]
    f.append(ev("response.output_text.done", {"type": "response.output_text.done", "sequence_number": 90, "item_id": "m", "output_index": 0, "content_index": 0, "text": "".join(texts)}))
    f.append(ev("response.completed", {"type": "response.completed", "sequence_number": 91, "response": {"id": "r", "status": "completed", "output": [{"type": "message", "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": "".join(texts), "annotations": []}]}], "usage": {"input_tokens": 2, "output_tokens": 4}}}))
    return "".join(f)


def responses_tool(args):
    f = [ev("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": ""}})]
    f += [ev("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "sequence_number": 2 + i, "item_id": "fc", "output_index": 0, "delta": a}) for i, a in enumerate(args)]
    f.append(ev("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "sequence_number": 40, "item_id": "fc", "output_index": 0, "arguments": "".join(args)}))
    f.append(ev("response.completed", {"type": "response.completed", "sequence_number": 50, "response": {"id": "r", "status": "completed", "output": []}}))
    return "".join(f)


def responses_thinking(think, text):
    return (ev("response.reasoning_summary_text.delta", {"type": "response.reasoning_summary_text.delta", "sequence_number": 1, "item_id": "rs", "output_index": 0, "summary_index": 0, "delta": think})
            + ev("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "m", "output_index": 1, "content_index": 0, "delta": text})
            + ev("error", {"type": "error", "code": "server_error", "message": "boom", "param": None, "sequence_number": 3}))


def anthropic_text(texts):
    f = [ev("message_start", {"type": "message_start", "message": {"id": "msg", "type": "message", "role": "assistant", "content": [], "model": "c", "usage": {"input_tokens": 3, "output_tokens": 1}}}),
         ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
         ev("ping", {"type": "ping"})]
    f += [ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}) for t in texts]
    f.append(ev("content_block_stop", {"type": "content_block_stop", "index": 0}))
    f.append(ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 9}}))
    f.append(ev("message_stop", {"type": "message_stop"}))
    return "".join(f)


def anthropic_tool(args):
    f = [ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}})]
    f += [ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": a}}) for a in args]
    f.append(ev("message_stop", {"type": "message_stop"}))
    return "".join(f)


def anthropic_thinking(think, text):
    return (ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": think}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "x"}})
            + ev("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": text}})
            + ev("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))


def gemini_text(texts):
    f = [sse({"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "index": 0}], "modelVersion": "g"}) for t in texts]
    f.append(sse({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 5}}))
    return "".join(f)


def gemini_tool(args):
    return sse({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": json.loads("".join(args))}}]}, "finishReason": "STOP", "index": 0}]})


def gemini_thinking(think, text):
    return (sse({"candidates": [{"content": {"role": "model", "parts": [{"text": think, "thought": True}]}, "index": 0}]})
            + sse({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finish_reason": "STOP", "index": 0}]})
            + sse({"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}}))


def completions_text(texts):
    f = [sse({"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": t, "logprobs": None, "finish_reason": None}]}) for t in texts]
    f.append(sse({"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}))
    f.append("data: [DONE]\n\n")
    return "".join(f)


STREAMS = {
    CHAT: (chat_text, chat_tool, chat_thinking,
           'data: {"choices":[],"future_field":{"x":1}}\n\n'),
    RESPONSES: (responses_text, responses_tool, responses_thinking,
                'event: response.future_thing\ndata: {"type":"response.future_thing","sequence_number":99}\n\n'),
    ANTHROPIC: (anthropic_text, anthropic_tool, anthropic_thinking,
                'event: content_block_future\ndata: {"type":"content_block_future","index":0}\n\n'),
    GEMINI: (gemini_text, gemini_tool, gemini_thinking,
             'data: {"candidates":[],"futureField":true}\n\n'),
}

TEXTS = ["Hello", " wor", "ld: call 555-0100 or mail a@b.io", ' "quoted"\n\ttab \u00e9\U0001F600']
ARGS = ['{"ci', 'ty": "Par', 'is", "card": "4111 1111 1111 1111"}']
NAMES = {CHAT: "chat", RESPONSES: "responses", ANTHROPIC: "anthropic", GEMINI: "gemini",
         COMPLETIONS: "completions", EMBEDDINGS: "embeddings"}


def streams(p):
    if p == COMPLETIONS:
        return {"text": completions_text(TEXTS), "crlf": completions_text(["a"]).replace("\n", "\r\n")}
    if p == EMBEDDINGS:
        return {}
    text, tool, thinking, unknown = STREAMS[p]
    return {
        "text": text(TEXTS),
        "tool": tool(ARGS),
        "thinking": thinking("let me think", "I can't help with that."),
        "unknown": unknown + ": keep-alive\n\n" + text(["ok"]),
        "crlf": text(["a", "b"]).replace("\n", "\r\n"),
    }


# ---- request bodies ----

def requests(p):
    if p == CHAT:
        return [
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            {"model": "m", "messages": [{"role": "system", "content": "be kind"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}]},
            {"model": "m", "stream": True, "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": js({"error": "nope"})}],
             "tools": [{"type": "function", "function": {"name": "lookup", "description": "d", "parameters": {"type": "object"}}}]},
        ]
    if p == RESPONSES:
        return [
            {"model": "m", "stream": True, "input": "hi", "instructions": "be kind"},
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "a"}]}]},
            {"model": "m", "stream": True, "input": [
                {"role": "user", "content": "q"},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": js({"status": "error"})}],
             "tools": [{"type": "function", "name": "lookup", "parameters": {}}]},
        ]
    if p == ANTHROPIC:
        return [
            {"model": "c", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            {"model": "c", "max_tokens": 100, "system": [{"type": "text", "text": "sys"}], "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]},
            {"model": "c", "max_tokens": 100, "stream": True, "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"x": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": True, "content": [{"type": "text", "text": "r"}]}]}],
             "tools": [{"name": "f", "description": "d", "input_schema": {}}]},
        ]
    if p == COMPLETIONS:
        return [
            {"model": "m", "stream": True, "prompt": "hi", "suffix": "z"},
            {"model": "m", "prompt": ["a", "b"]},
            {"prompt": [[1], [2]]},
        ]
    if p == EMBEDDINGS:
        return [{"model": "m", "input": "a"}, {"input": ["a", "b"]}, {"input": [1, 2]}]
    return [
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"contents": [{"role": "user", "parts": [{"text": "a"}]}], "systemInstruction": {"parts": [{"text": "s"}]}},
        {"contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {"r": 1}}}]}],
         "tools": [{"functionDeclarations": [{"name": "lookup", "description": "d"}]}]},
    ]


PATHS = {
    CHAT: "/openai/deployments/d/chat/completions",
    RESPONSES: "/openai/v1/responses",
    ANTHROPIC: "/v1/messages",
    GEMINI: "/v1/models/gemini-pro:generateContent",
    COMPLETIONS: "/openai/v1/completions",
    EMBEDDINGS: "/v1/embeddings",
}


# ---- whole answers ----

def wholes(p):
    t = TEXTS[3]
    if p == CHAT:
        return [
            {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
            {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": "no", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, "finish_reason": "tool_calls"}]},
        ]
    if p == RESPONSES:
        return [
            {"id": "r", "object": "response", "status": "completed", "output": [{"type": "message", "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": t, "annotations": []}]}]},
            {"id": "r", "status": "completed", "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}], "usage": {"input_tokens": 1, "output_tokens": 2}},
        ]
    if p == ANTHROPIC:
        return [
            {"id": "msg", "type": "message", "role": "assistant", "model": "c", "content": [{"type": "text", "text": t}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 2}},
            {"id": "msg", "type": "message", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": [1, 2]}}], "stop_reason": "tool_use"},
        ]
    if p == COMPLETIONS:
        return [{"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": t, "logprobs": None, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}]
    if p == EMBEDDINGS:
        return [{"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, -0.2]}], "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}}]
    return [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2}},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": True}, {"function_call": {"name": "f", "args": {"a": {"b": None}}}}]}, "finish_reason": "STOP"}]},
    ]


# ---- the JSON the skim reader sees ----

SKIM = [
    '{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}',
    '{"id":"c","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a\\"b\\\\c\\n\\u00e9\\ud83d\\ude00"},"logprobs":null,"finish_reason":null}]}',
    '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"a\\":1}"}}]}}]}',
    '{"choices":[],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":4294967296,"total_tokens":0}}',
    ' [ 1 , -2.5e+3 , 0 , true , false , null , "x" , { } , [ ] ] ',
    '{"a":{"b":{"c":[[[{"d":"\u00e9"}]]]}},"a":1}',
    '{"\\u0061":1,"n":-0,"f":1E400,"e":0.5e-7}',
    '"\\ud800"',
    '[1,]',
    '{"k":"v"} x',
    "[" * 99 + "]" * 99,
    "[" * 101 + "]" * 101,
]


# ---- packs ----

def packs():
    out = {}
    for name in ("default.yaml", "catalog.yaml"):
        with open(os.path.join(ROOT, "config", "packs", name), encoding="utf-8") as f:
            out[name] = f.read()
    # The catalog's validators in groups of a few, each a pack of its own.
    lines = out["catalog.yaml"].splitlines()
    start = lines.index("validators:") + 1
    entries, cur = [], []
    for line in lines[start:]:
        if line.startswith("  - ") or line.startswith("  # ") and cur:
            if cur:
                entries.append(cur)
            cur = []
        if not line.startswith("  # "):
            cur.append(line)
    if cur:
        entries.append(cur)
    for i in range(0, len(entries), 6):
        body = "\n".join(l for e in entries[i:i + 6] for l in e)
        out[f"catalog-{i // 6:02}.yaml"] = f"name: part\nvalidators:\n{body}\n"
    out["flow.json.yaml"] = js({"name": "j", "validators": [{"type": "regex", "mode": "redact", "params": {"pattern": "(?i)secret-\\d+", "expect_match": False}}]}) + "\n"
    out["anchors.yaml"] = "base: &b {type: banned_words, params: {words: [x]}}\nvalidators: [*b, *b]\n"
    out["empty.yaml"] = "validators:\n"
    return out


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)

    # sse_framer: [cuts][piece lengths][stream]
    framing = [
        "data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\r\n",
        "event: x\r\ndata: h\u00e9llo\r\n\r\n: comment\n\ndata: a\rdata: b\r\r\ndata: [DONE]\n\n",
        ": keep-alive\n\nretry: 3000\n\nid: 7\nevent: e\ndata\ndata:  two\n\n",
        "data: {\"a\":\ndata:1}\n\ndata: unterminated tail",
    ]
    for i, s in enumerate(framing):
        b = s.encode()
        write("sse_framer", f"whole-{i}", bytes([0]) + b)
        write("sse_framer", f"cuts-{i}", bytes([4, 1, 7, 3, 2]) + b)
        write("sse_framer", f"bytewise-{i}", bytes([15] + [1] * 15) + b)
    write("sse_framer", "limit", bytes([0xF2, 5, 9]) + framing[1].encode())
    for p, name in list(NAMES.items())[:4]:
        write("sse_framer", f"{name}-text", bytes([3, 10, 40, 1]) + streams(p)["text"].encode())

    for p, name in NAMES.items():
        for kind, s in streams(p).items():
            write("stream_decoder", f"{name}-{kind}", bytes([p]) + s.encode())
            # redact_rewrite: [protocol | count << 4][5 bytes a redaction][stream]
            specs = bytes([0, 0, 7, 12, 0, 1, 0, 0, 3, 4, 0, 0, 30, 200, 3])
            write("redact_rewrite", f"{name}-{kind}", bytes([p | 3 << 4]) + specs + s.encode())
        if streams(p):
            write("redact_rewrite", f"{name}-none", bytes([p]) + streams(p)["text"].encode())
        for i, body in enumerate(requests(p)):
            write("request_parser", f"{name}-{i}", bytes([p]) + js(body).encode())
        write("request_parser", f"{name}-path", bytes([p | 0x10]) + f"{PATHS[p]}\n".encode() + js(requests(p)[0]).encode())
        write("request_parser", f"{name}-bad", bytes([p]) + b'{"messages": [{"role": 1}]')
        for i, body in enumerate(wholes(p)):
            write("response_decoder", f"{name}-{i}", bytes([p]) + js(body).encode())

    for i, s in enumerate(SKIM):
        write("skim", f"plain-{i:02}", bytes([0]) + s.encode())
        write("skim", f"choices-{i:02}", bytes([4, 0x81, 7, 2, 0x80]) + s.encode())

    for name, text in packs().items():
        write("pack_loader", name, text)


if __name__ == "__main__":
    main()
