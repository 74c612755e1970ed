#!/usr/bin/env python3
"""Drives the official OpenAI Python SDK against a running guardwire.

Run by tests/sdk_openai.rs (through tests/run, which sets up the venv):

    GUARDWIRE_BASE_URL=http://127.0.0.1:PORT/v1 python openai_chat.py <scenario>

Scenarios:
  clean_stream       stream a chat completion; report the assembled text
  blocked_stream     stream; the SDK must raise openai.APIError mid-stream; report the text
                     yielded before it and the exception's class, message, code and type
  blocked_tool_args  like blocked_stream, assembling delta.tool_calls[].function.arguments
  nonstream_block    non-streamed call; must raise openai.BadRequestError
  input_block        the prompt carries INPUT_BANNED; must raise openai.BadRequestError
  clean_nonstream    non-streamed call; report the message content
  completion_blocked legacy Completions, streamed: must raise openai.APIError mid-stream; report
                     the text yielded before it and the exception's fields
  completion_clean   legacy Completions, streamed; report the assembled text
  embeddings_input_block
                     Embeddings with INPUT_BANNED among the inputs; must raise
                     openai.BadRequestError
  embeddings_clean   Embeddings of two texts; report the vectors' count and length
  final_tool_calls   stream with the stream helper; report the final completion's tool call
                     ids and names as it joined them, and the exception that ended it (if any)

Output, exit status, deadline and the prompts' contract: see sdk_harness.py.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Iterable, List

import openai

from sdk_harness import (
    CLEAN_PROMPT,
    INPUT_BANNED,
    REQUEST_TIMEOUT_SECONDS,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_PARAMETERS,
    ScenarioFailed,
    base_url,
    error_fields,
    run,
)

MODEL = "gpt-4o"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": TOOL_PARAMETERS,
        },
    }
]


def make_client() -> openai.OpenAI:
    # trust_env=False: never route the loopback test traffic through a proxy from the environment.
    http_client = openai.DefaultHttpxClient(trust_env=False, timeout=REQUEST_TIMEOUT_SECONDS)
    return openai.OpenAI(
        base_url=base_url(),
        api_key="test-key",
        max_retries=0,
        timeout=REQUEST_TIMEOUT_SECONDS,
        http_client=http_client,
    )


def user(text: str) -> List[Dict[str, str]]:
    return [{"role": "user", "content": text}]


# ---- scenarios ----


def clean_stream(client: openai.OpenAI) -> Dict[str, Any]:
    text = ""
    chunks = 0
    finish_reasons: List[str] = []
    stream = client.chat.completions.create(model=MODEL, messages=user(CLEAN_PROMPT), stream=True)
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            if choice.delta.content:
                text += choice.delta.content
            if choice.finish_reason:
                finish_reasons.append(choice.finish_reason)
    return {"text": text, "chunks": chunks, "finish_reasons": finish_reasons}


def _stream_until_error(
    client: openai.OpenAI, collect: Callable[[Any], None], **kwargs: Any
) -> Dict[str, Any]:
    chunks = 0
    try:
        stream = client.chat.completions.create(model=MODEL, stream=True, **kwargs)
        for chunk in stream:
            chunks += 1
            collect(chunk)
    except openai.APIError as e:
        return {"chunks": chunks, **error_fields(e)}
    raise ScenarioFailed(
        f"the stream ended normally after {chunks} chunks; expected openai.APIError from a "
        "guardrail_violation error event"
    )


def blocked_stream(client: openai.OpenAI) -> Dict[str, Any]:
    parts: List[str] = []

    def collect(chunk: Any) -> None:
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)

    result = _stream_until_error(client, collect, messages=user(CLEAN_PROMPT))
    return {"text": "".join(parts), **result}


def blocked_tool_args(client: openai.OpenAI) -> Dict[str, Any]:
    arguments: Dict[int, str] = {}
    names: Dict[int, str] = {}

    def collect(chunk: Any) -> None:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                if call.function is None:
                    continue
                if call.function.name:
                    names[call.index] = names.get(call.index, "") + call.function.name
                if call.function.arguments:
                    arguments[call.index] = arguments.get(call.index, "") + call.function.arguments

    result = _stream_until_error(
        client,
        collect,
        messages=user("Search the archive for me."),
        tools=TOOLS,
    )
    return {
        # JSON object keys are strings; "0" is the first tool call.
        "arguments": {str(k): v for k, v in sorted(arguments.items())},
        "names": {str(k): v for k, v in sorted(names.items())},
        **result,
    }


def _expect_bad_request(client: openai.OpenAI, prompt: str, **kwargs: Any) -> Dict[str, Any]:
    try:
        completion = client.chat.completions.create(model=MODEL, messages=user(prompt), **kwargs)
    except openai.BadRequestError as e:
        return error_fields(e)
    except openai.APIError as e:
        raise ScenarioFailed(
            f"expected openai.BadRequestError, got {type(e).__name__}: {e}"
        ) from e
    if isinstance(completion, openai.Stream):
        completion.close()
        got = "the stream started (HTTP 200)"
    else:
        got = f"the request succeeded with {completion!r}"[:500]
    raise ScenarioFailed(f"{got}; expected openai.BadRequestError")


def nonstream_block(client: openai.OpenAI) -> Dict[str, Any]:
    return _expect_bad_request(client, CLEAN_PROMPT)


def input_block(client: openai.OpenAI) -> Dict[str, Any]:
    return _expect_bad_request(client, INPUT_BANNED, stream=True)


def clean_nonstream(client: openai.OpenAI) -> Dict[str, Any]:
    completion = client.chat.completions.create(model=MODEL, messages=user(CLEAN_PROMPT))
    choice = completion.choices[0]
    return {
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
        "id": completion.id,
    }


def _completion_stream(client: openai.OpenAI) -> Any:
    return client.completions.create(model=MODEL, prompt=CLEAN_PROMPT, stream=True)


def completion_blocked(client: openai.OpenAI) -> Dict[str, Any]:
    parts: List[str] = []
    chunks = 0
    try:
        for chunk in _completion_stream(client):
            chunks += 1
            parts.extend(c.text for c in chunk.choices if c.text)
    except openai.APIError as e:
        return {"text": "".join(parts), "chunks": chunks, **error_fields(e)}
    raise ScenarioFailed(f"the completion stream ended normally after {chunks} chunks")


def completion_clean(client: openai.OpenAI) -> Dict[str, Any]:
    parts = [c.text for chunk in _completion_stream(client) for c in chunk.choices if c.text]
    return {"text": "".join(parts)}


def embeddings_input_block(client: openai.OpenAI) -> Dict[str, Any]:
    try:
        client.embeddings.create(model=MODEL, input=[CLEAN_PROMPT, INPUT_BANNED])
    except openai.BadRequestError as e:
        return error_fields(e)
    raise ScenarioFailed("the embeddings request succeeded; expected openai.BadRequestError")


def embeddings_clean(client: openai.OpenAI) -> Dict[str, Any]:
    result = client.embeddings.create(model=MODEL, input=[CLEAN_PROMPT, "another"])
    return {"count": len(result.data), "dims": len(result.data[0].embedding)}


def rate_limited(client: openai.OpenAI) -> Dict[str, Any]:
    """A key with `rpm_limit: 1`: the first call passes, the second is refused as OpenAI refuses
    one over its rate limit."""
    first = client.chat.completions.with_raw_response.create(model=MODEL, messages=user(CLEAN_PROMPT))
    limits = {k: v for k, v in first.headers.items() if k.startswith("x-ratelimit-")}
    try:
        client.chat.completions.create(model=MODEL, messages=user(CLEAN_PROMPT))
    except openai.RateLimitError as e:
        out = error_fields(e)
        out["first_headers"] = limits
        out["headers"] = {
            k: v
            for k, v in e.response.headers.items()
            if k.startswith("x-ratelimit-") or k.startswith("retry-after")
        }
        return out
    except openai.APIError as e:
        raise ScenarioFailed(f"expected openai.RateLimitError, got {type(e).__name__}: {e}") from e
    raise ScenarioFailed("the second call over rpm_limit: 1 was not refused")


def _by_position(chunks: Callable[[], Iterable[Any]], text_of: Callable[[Any], Any]) -> Dict[str, Any]:
    """The text as an app that reads `chunk.choices[0]` (by position, as the SDK's examples
    do) builds it, and how the stream ended."""
    text = ""
    try:
        for chunk in chunks():
            if chunk.choices:
                text += text_of(chunk.choices[0]) or ""
    except openai.APIError as e:
        return {"text": text, **error_fields(e)}
    return {"text": text, "exception": None}


def chat_by_position(client: openai.OpenAI) -> Dict[str, Any]:
    return _by_position(
        lambda: client.chat.completions.create(model=MODEL, messages=user(CLEAN_PROMPT), stream=True),
        lambda c: c.delta.content,
    )


def completion_by_position(client: openai.OpenAI) -> Dict[str, Any]:
    return _by_position(lambda: _completion_stream(client), lambda c: c.text)


def final_tool_calls(client: openai.OpenAI) -> Dict[str, Any]:
    """The tool calls as the stream helper assembles them (`accumulate_delta` joins each
    string of a call's deltas), and how the stream ended."""
    calls: List[Dict[str, Any]] = []
    try:
        with client.chat.completions.stream(model=MODEL, messages=user(CLEAN_PROMPT), tools=TOOLS) as stream:
            for _ in stream:
                pass
            message = stream.get_final_completion().choices[0].message
            for call in message.tool_calls or []:
                calls.append({"id": call.id, "name": call.function.name})
    except openai.APIError as e:
        return {"calls": calls, **error_fields(e)}
    return {"calls": calls, "exception": None}


SCENARIOS: Dict[str, Callable[[openai.OpenAI], Dict[str, Any]]] = {
    "chat_by_position": chat_by_position,
    "completion_by_position": completion_by_position,
    "final_tool_calls": final_tool_calls,
    "rate_limited": rate_limited,
    "completion_blocked": completion_blocked,
    "completion_clean": completion_clean,
    "embeddings_input_block": embeddings_input_block,
    "embeddings_clean": embeddings_clean,
    "clean_stream": clean_stream,
    "blocked_stream": blocked_stream,
    "blocked_tool_args": blocked_tool_args,
    "nonstream_block": nonstream_block,
    "input_block": input_block,
    "clean_nonstream": clean_nonstream,
}


if __name__ == "__main__":
    run(sys.argv, SCENARIOS, make_client, {"openai_version": openai.__version__})
