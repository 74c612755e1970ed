#!/usr/bin/env python3
"""Drives the official OpenAI Python SDK's Responses API against a running guardwire.

Run by tests/sdk_responses.rs (through tests/run, which sets up the venv):

    GUARDWIRE_BASE_URL=http://127.0.0.1:PORT/v1 python openai_responses.py <scenario>

Scenarios:
  clean_stream           client.responses.create(stream=True); report the text assembled from
                         response.output_text.delta events and the final status
  clean_stream_helper    client.responses.stream(...); report the text of the delta events and
                         of get_final_response().output_text
  blocked_stream         create(stream=True); the SDK must raise openai.APIError mid-stream;
                         report the text yielded before it and the exception's fields
  blocked_stream_helper  the same through client.responses.stream(...)
  blocked_tool_args      like blocked_stream, assembling response.function_call_arguments.delta
                         per output_index
  nonstream_block        non-streamed call; must raise openai.BadRequestError
  input_block            streamed call whose input carries INPUT_BANNED; must raise
                         openai.BadRequestError
  clean_nonstream        non-streamed call; report output_text, status and id

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
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": TOOL_PARAMETERS,
        "strict": False,
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


# ---- scenarios ----


class Collected:
    """What the application saw of a stream, event by event."""

    def __init__(self) -> None:
        self.events = 0
        self.types: List[str] = []
        self.text = ""
        self.done_texts: List[str] = []
        self.arguments: Dict[int, str] = {}
        self.names: Dict[int, str] = {}
        self.status: Any = None

    def add(self, event: Any) -> None:
        self.events += 1
        kind = getattr(event, "type", None)
        self.types.append(str(kind))
        if kind == "response.output_text.delta":
            self.text += event.delta
        elif kind == "response.output_text.done":
            self.done_texts.append(event.text)
        elif kind == "response.function_call_arguments.delta":
            i = event.output_index
            self.arguments[i] = self.arguments.get(i, "") + event.delta
        elif kind == "response.output_item.added" and getattr(event.item, "type", None) == "function_call":
            self.names[event.output_index] = event.item.name
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.status = event.response.status

    def report(self) -> Dict[str, Any]:
        return {
            "events": self.events,
            "event_types": self.types,
            "text": self.text,
            "done_texts": self.done_texts,
            # JSON object keys are strings; "0" is output item 0.
            "arguments": {str(k): v for k, v in sorted(self.arguments.items())},
            "names": {str(k): v for k, v in sorted(self.names.items())},
            "status": self.status,
        }


def clean_stream(client: openai.OpenAI) -> Dict[str, Any]:
    seen = Collected()
    for event in client.responses.create(model=MODEL, input=CLEAN_PROMPT, stream=True):
        seen.add(event)
    return seen.report()


def clean_stream_helper(client: openai.OpenAI) -> Dict[str, Any]:
    seen = Collected()
    with client.responses.stream(model=MODEL, input=CLEAN_PROMPT) as stream:
        for event in stream:
            seen.add(event)
        final = stream.get_final_response()
    return {**seen.report(), "final_output_text": final.output_text, "final_status": final.status}


def _until_error(events: Callable[[], Iterable[Any]], seen: Collected) -> Dict[str, Any]:
    try:
        for event in events():
            seen.add(event)
    except openai.APIError as e:
        return {**seen.report(), **error_fields(e)}
    raise ScenarioFailed(
        f"the stream ended normally after {seen.events} events ({seen.types[-3:]}); expected "
        "openai.APIError from guardwire's `error` event"
    )


def blocked_stream(client: openai.OpenAI) -> Dict[str, Any]:
    return _until_error(
        lambda: client.responses.create(model=MODEL, input=CLEAN_PROMPT, stream=True), Collected()
    )


def blocked_stream_helper(client: openai.OpenAI) -> Dict[str, Any]:
    def events() -> Iterable[Any]:
        with client.responses.stream(model=MODEL, input=CLEAN_PROMPT) as stream:
            yield from stream

    return _until_error(events, Collected())


def blocked_tool_args(client: openai.OpenAI) -> Dict[str, Any]:
    return _until_error(
        lambda: client.responses.create(
            model=MODEL, input="Search the archive for me.", tools=TOOLS, stream=True
        ),
        Collected(),
    )


def _expect_bad_request(client: openai.OpenAI, prompt: str, **kwargs: Any) -> Dict[str, Any]:
    try:
        response = client.responses.create(model=MODEL, input=prompt, **kwargs)
    except openai.BadRequestError as e:
        return error_fields(e)
    except openai.APIError as e:
        raise ScenarioFailed(f"expected openai.BadRequestError, got {type(e).__name__}: {e}") from e
    if isinstance(response, openai.Stream):
        response.close()
        got = "the stream started (HTTP 200)"
    else:
        got = f"the request succeeded with {response!r}"[:500]
    raise ScenarioFailed(f"{got}; expected openai.BadRequestError")


def nonstream_block(client: openai.OpenAI) -> Dict[str, Any]:
    return _expect_bad_request(client, CLEAN_PROMPT)


def input_block(client: openai.OpenAI) -> Dict[str, Any]:
    return _expect_bad_request(client, INPUT_BANNED, stream=True)


def clean_nonstream(client: openai.OpenAI) -> Dict[str, Any]:
    response = client.responses.create(model=MODEL, input=CLEAN_PROMPT)
    return {"output_text": response.output_text, "status": response.status, "id": response.id}


def snapshots(client: openai.OpenAI) -> Dict[str, Any]:
    """The `snapshot` of each text delta event of `responses.stream()` (the part's text so far,
    what a UI renders while streaming), and how the stream ended."""
    seen: List[str] = []
    try:
        with client.responses.stream(model=MODEL, input=CLEAN_PROMPT) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    seen.append(event.snapshot)
    except openai.APIError as e:
        return {"snapshots": seen, **error_fields(e)}
    return {"snapshots": seen, "exception": None}


SCENARIOS: Dict[str, Callable[[openai.OpenAI], Dict[str, Any]]] = {
    "snapshots": snapshots,
    "clean_stream": clean_stream,
    "clean_stream_helper": clean_stream_helper,
    "blocked_stream": blocked_stream,
    "blocked_stream_helper": blocked_stream_helper,
    "blocked_tool_args": blocked_tool_args,
    "nonstream_block": nonstream_block,
    "input_block": input_block,
    "clean_nonstream": clean_nonstream,
}


if __name__ == "__main__":
    run(sys.argv, SCENARIOS, make_client, {"openai_version": openai.__version__})
