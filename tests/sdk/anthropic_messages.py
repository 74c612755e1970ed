#!/usr/bin/env python3
"""Drives the official Anthropic Python SDK (Messages) against a running guardwire.

Run by tests/sdk_anthropic.rs (through tests/run, which sets up the venv):

    GUARDWIRE_BASE_URL=http://127.0.0.1:PORT python anthropic_messages.py <scenario>

Scenarios:
  clean_stream        client.messages.stream(...); report the text of text_stream and of
                      get_final_message()
  clean_stream_raw    client.messages.create(stream=True); report the text of the text_delta
                      events
  blocked_stream      client.messages.stream(...) text_stream; the SDK must raise
                      anthropic.APIError mid-stream; report the text yielded before it and the
                      exception's fields
  blocked_stream_raw  the same through client.messages.create(stream=True)
  blocked_tool_args   client.messages.stream(...) with a tool; like blocked_stream, assembling
                      the input_json_delta pieces per content block index
  nonstream_block     non-streamed call; must raise anthropic.BadRequestError
  input_block         streamed call whose prompt carries INPUT_BANNED; must raise
                      anthropic.BadRequestError
  clean_nonstream     non-streamed call; report the text, stop_reason and id

Output, exit status, deadline and the prompts' contract: see sdk_harness.py.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Iterable, List

import anthropic

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

MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 256
TOOLS = [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_PARAMETERS}]


def make_client() -> anthropic.Anthropic:
    # trust_env=False: never route the loopback test traffic through a proxy from the environment.
    http_client = anthropic.DefaultHttpxClient(trust_env=False, timeout=REQUEST_TIMEOUT_SECONDS)
    return anthropic.Anthropic(
        base_url=base_url(),
        api_key="test-key",
        max_retries=0,
        timeout=REQUEST_TIMEOUT_SECONDS,
        http_client=http_client,
        open_telemetry=False,
    )


def user(text: str) -> List[Dict[str, str]]:
    return [{"role": "user", "content": text}]


# ---- scenarios ----


class Collected:
    """What the application saw of a stream, event by event."""

    def __init__(self) -> None:
        self.events = 0
        self.types: List[str] = []
        self.text = ""
        self.arguments: Dict[int, str] = {}
        self.names: Dict[int, str] = {}
        self.stop_reason: Any = None

    def add(self, event: Any) -> None:
        """A raw stream event (MessageStream also yields derived `text`/`input_json` events,
        which repeat the raw deltas and are only counted)."""
        self.events += 1
        kind = getattr(event, "type", None)
        self.types.append(str(kind))
        if kind == "content_block_start" and event.content_block.type == "tool_use":
            self.names[event.index] = event.content_block.name
        elif kind == "content_block_delta":
            if event.delta.type == "text_delta":
                self.text += event.delta.text
            elif event.delta.type == "input_json_delta":
                self.arguments[event.index] = self.arguments.get(event.index, "") + event.delta.partial_json
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason

    def report(self) -> Dict[str, Any]:
        return {
            "events": self.events,
            "event_types": self.types,
            "text": self.text,
            # JSON object keys are strings; "1" is content block 1.
            "arguments": {str(k): v for k, v in sorted(self.arguments.items())},
            "names": {str(k): v for k, v in sorted(self.names.items())},
            "stop_reason": self.stop_reason,
        }


def clean_stream(client: anthropic.Anthropic) -> Dict[str, Any]:
    with client.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT)) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    final_text = "".join(b.text for b in final.content if b.type == "text")
    return {
        "text": text,
        "final_text": final_text,
        "stop_reason": final.stop_reason,
        "id": final.id,
    }


def clean_stream_raw(client: anthropic.Anthropic) -> Dict[str, Any]:
    seen = Collected()
    stream = client.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT), stream=True
    )
    for event in stream:
        seen.add(event)
    return seen.report()


def _until_error(events: Callable[[], Iterable[Any]], seen: Collected) -> Dict[str, Any]:
    try:
        for event in events():
            seen.add(event)
    except anthropic.APIError as e:
        return {**seen.report(), **error_fields(e)}
    raise ScenarioFailed(
        f"the stream ended normally after {seen.events} events ({seen.types[-3:]}); expected "
        "anthropic.APIError from guardwire's `error` event"
    )


def blocked_stream(client: anthropic.Anthropic) -> Dict[str, Any]:
    parts: List[str] = []
    try:
        with client.messages.stream(
            model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT)
        ) as stream:
            for text in stream.text_stream:
                parts.append(text)
    except anthropic.APIError as e:
        return {"text": "".join(parts), "pieces": len(parts), **error_fields(e)}
    raise ScenarioFailed(
        f"text_stream ended normally after {len(parts)} pieces; expected anthropic.APIError from "
        "guardwire's `error` event"
    )


def blocked_stream_raw(client: anthropic.Anthropic) -> Dict[str, Any]:
    return _until_error(
        lambda: client.messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT), stream=True
        ),
        Collected(),
    )


def blocked_tool_args(client: anthropic.Anthropic) -> Dict[str, Any]:
    def events() -> Iterable[Any]:
        with client.messages.stream(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            messages=user("Search the archive for me."),
            tools=TOOLS,
        ) as stream:
            for event in stream:
                # Only the raw events: the derived `text`/`input_json` ones repeat their deltas.
                if event.type in ("text", "input_json"):
                    continue
                yield event

    return _until_error(events, Collected())


def _expect_bad_request(client: anthropic.Anthropic, prompt: str, **kwargs: Any) -> Dict[str, Any]:
    try:
        message = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=user(prompt), **kwargs)
    except anthropic.BadRequestError as e:
        return error_fields(e)
    except anthropic.APIError as e:
        raise ScenarioFailed(f"expected anthropic.BadRequestError, got {type(e).__name__}: {e}") from e
    if isinstance(message, anthropic.Stream):
        message.close()
        got = "the stream started (HTTP 200)"
    else:
        got = f"the request succeeded with {message!r}"[:500]
    raise ScenarioFailed(f"{got}; expected anthropic.BadRequestError")


def nonstream_block(client: anthropic.Anthropic) -> Dict[str, Any]:
    return _expect_bad_request(client, CLEAN_PROMPT)


def input_block(client: anthropic.Anthropic) -> Dict[str, Any]:
    return _expect_bad_request(client, INPUT_BANNED, stream=True)


def clean_nonstream(client: anthropic.Anthropic) -> Dict[str, Any]:
    message = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT))
    return {
        "text": "".join(b.text for b in message.content if b.type == "text"),
        "stop_reason": message.stop_reason,
        "id": message.id,
    }


def blocks_as_built(client: anthropic.Anthropic) -> Dict[str, Any]:
    """Each text block as the SDK builds it (`current_message_snapshot`, what
    `get_final_message()` returns), and how the stream ended."""
    stream_ref: List[Any] = []

    def blocks() -> List[str]:
        if not stream_ref:
            return []
        try:
            snapshot = stream_ref[0].current_message_snapshot
        except Exception:  # noqa: BLE001 - no snapshot before the first event
            return []
        return [b.text for b in snapshot.content if b.type == "text"]

    try:
        with client.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, messages=user(CLEAN_PROMPT)) as stream:
            stream_ref.append(stream)
            for _ in stream:
                pass
    except anthropic.APIError as e:
        return {"blocks": blocks(), **error_fields(e)}
    return {"blocks": blocks(), "exception": None}


SCENARIOS: Dict[str, Callable[[anthropic.Anthropic], Dict[str, Any]]] = {
    "blocks_as_built": blocks_as_built,
    "clean_stream": clean_stream,
    "clean_stream_raw": clean_stream_raw,
    "blocked_stream": blocked_stream,
    "blocked_stream_raw": blocked_stream_raw,
    "blocked_tool_args": blocked_tool_args,
    "nonstream_block": nonstream_block,
    "input_block": input_block,
    "clean_nonstream": clean_nonstream,
}


if __name__ == "__main__":
    run(sys.argv, SCENARIOS, make_client, {"anthropic_version": anthropic.__version__})
