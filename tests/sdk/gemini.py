#!/usr/bin/env python3
"""Drives the official Google Gen AI Python SDK (google-genai, Gemini API) against a running
guardwire.

Run by tests/sdk_gemini.rs (through tests/run, which sets up the venv):

    GUARDWIRE_BASE_URL=http://127.0.0.1:PORT python gemini.py <scenario>

Scenarios:
  clean_stream            client.models.generate_content_stream(...); report the text assembled
                          from every chunk's text parts and the finish reasons
  blocked_stream          stream; the SDK must raise google.genai.errors.ClientError (code 400)
                          mid-stream; report the text yielded before it and the error's fields
  blocked_function_call   stream with a function declared; like blocked_stream, also reporting
                          every function call the SDK yielded (function calls arrive whole)
  nonstream_block         client.models.generate_content(...); must raise ClientError (400)
  input_block             streamed call whose prompt carries INPUT_BANNED; must raise
                          ClientError (400)
  clean_nonstream         generate_content; report the text and finish reason

Output, exit status, deadline and the prompts' contract: see sdk_harness.py.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional

from google import genai
from google.genai import errors, types

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

MODEL = "gemini-2.5-flash"


def make_client() -> genai.Client:
    return genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(
            base_url=base_url(),
            api_version="v1beta",
            timeout=int(REQUEST_TIMEOUT_SECONDS * 1000),
            # One attempt: no retries, whatever the status.
            retry_options=types.HttpRetryOptions(attempts=1),
            # Never route the loopback test traffic through a proxy from the environment.
            client_args={"trust_env": False},
        ),
    )


def tool_config() -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name=TOOL_NAME,
                        description=TOOL_DESCRIPTION,
                        parameters_json_schema=TOOL_PARAMETERS,
                    )
                ]
            )
        ],
        # The application sees the function calls; the SDK must not act on them.
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


# ---- scenarios ----


class Collected:
    """What the application saw of a stream, chunk by chunk."""

    def __init__(self) -> None:
        self.chunks = 0
        self.text = ""
        self.function_calls: List[Dict[str, Any]] = []
        self.finish_reasons: List[str] = []

    def add(self, chunk: types.GenerateContentResponse) -> None:
        self.chunks += 1
        for candidate in chunk.candidates or []:
            if candidate.finish_reason is not None:
                self.finish_reasons.append(str(candidate.finish_reason.value))
            content = candidate.content
            for part in (content.parts if content else None) or []:
                if part.text and not part.thought:
                    self.text += part.text
                if part.function_call is not None:
                    self.function_calls.append(
                        {"name": part.function_call.name, "args": part.function_call.args}
                    )

    def report(self) -> Dict[str, Any]:
        return {
            "chunks": self.chunks,
            "text": self.text,
            "function_calls": self.function_calls,
            "finish_reasons": self.finish_reasons,
        }


def clean_stream(client: genai.Client) -> Dict[str, Any]:
    seen = Collected()
    for chunk in client.models.generate_content_stream(model=MODEL, contents=CLEAN_PROMPT):
        seen.add(chunk)
    return seen.report()


def _until_error(
    client: genai.Client, prompt: str, config: Optional[types.GenerateContentConfig] = None
) -> Dict[str, Any]:
    seen = Collected()
    try:
        for chunk in client.models.generate_content_stream(model=MODEL, contents=prompt, config=config):
            seen.add(chunk)
    except errors.ClientError as e:
        return {**seen.report(), **error_fields(e)}
    except errors.APIError as e:
        raise ScenarioFailed(
            f"expected google.genai.errors.ClientError, got {type(e).__name__}: {e}"
        ) from e
    raise ScenarioFailed(
        f"the stream ended normally after {seen.chunks} chunks; expected "
        "google.genai.errors.ClientError from guardwire's error chunk"
    )


def blocked_stream(client: genai.Client) -> Dict[str, Any]:
    return _until_error(client, CLEAN_PROMPT)


def blocked_function_call(client: genai.Client) -> Dict[str, Any]:
    return _until_error(client, "Search the archive for me.", tool_config())


def _expect_client_error(call: Callable[[], Any]) -> Dict[str, Any]:
    try:
        result = call()
    except errors.ClientError as e:
        return error_fields(e)
    except errors.APIError as e:
        raise ScenarioFailed(
            f"expected google.genai.errors.ClientError, got {type(e).__name__}: {e}"
        ) from e
    raise ScenarioFailed(
        f"the request succeeded with {result!r}"[:500] + "; expected google.genai.errors.ClientError"
    )


def nonstream_block(client: genai.Client) -> Dict[str, Any]:
    return _expect_client_error(
        lambda: client.models.generate_content(model=MODEL, contents=CLEAN_PROMPT)
    )


def input_block(client: genai.Client) -> Dict[str, Any]:
    # The stream is a generator: the request goes out when it is first iterated.
    seen = Collected()

    def call() -> Dict[str, Any]:
        for chunk in client.models.generate_content_stream(model=MODEL, contents=INPUT_BANNED):
            seen.add(chunk)
        return seen.report()

    return {**_expect_client_error(call), "chunks": seen.chunks}


def clean_nonstream(client: genai.Client) -> Dict[str, Any]:
    response = client.models.generate_content(model=MODEL, contents=CLEAN_PROMPT)
    candidate = (response.candidates or [None])[0]
    finish = candidate.finish_reason if candidate is not None else None
    return {
        "text": response.text,
        "finish_reason": None if finish is None else str(finish.value),
    }


def text_by_position(client: genai.Client) -> Dict[str, Any]:
    """The text as `chunk.text` builds it (the first candidate by position), and how the stream
    ended."""
    text = ""
    try:
        for chunk in client.models.generate_content_stream(model=MODEL, contents=CLEAN_PROMPT):
            text += chunk.text or ""
    except errors.APIError as e:
        return {"text": text, **error_fields(e)}
    return {"text": text, "exception": None}


SCENARIOS: Dict[str, Callable[[genai.Client], Dict[str, Any]]] = {
    "text_by_position": text_by_position,
    "clean_stream": clean_stream,
    "blocked_stream": blocked_stream,
    "blocked_function_call": blocked_function_call,
    "nonstream_block": nonstream_block,
    "input_block": input_block,
    "clean_nonstream": clean_nonstream,
}


if __name__ == "__main__":
    from google.genai import version

    run(sys.argv, SCENARIOS, make_client, {"google_genai_version": version.__version__})
