"""Plumbing shared by the SDK scenario scripts in this directory (openai_chat.py,
openai_responses.py, anthropic_messages.py, gemini.py).

Each script runs one scenario against a running guardwire and prints exactly one JSON object on
stdout, with "ok": true/false. When an expected exception did not happen (or an unexpected one
did) the object says why under "failure", the same explanation goes to stderr, and the exit
status is 1. The scripts only ever talk to 127.0.0.1 and never retry.

The prompts below are part of the contract with the Rust tests (tests/sdk_*.rs): only
INPUT_BANNED may trip an input validator of their pack.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from typing import Any, Callable, Dict, Iterable, List, Mapping, NoReturn
from urllib.parse import urlparse

CLEAN_PROMPT = "Tell me a short story."
# Must match the `direction: input` regex of the test pack (secret-\d+).
INPUT_BANNED = "Please remember my code secret-1234 for later."
TOOL_NAME = "search_archive"
TOOL_DESCRIPTION = "Search the archive."
TOOL_PARAMETERS: Dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}
# The whole run (every request included) must end well before the Rust test gives up.
RUN_DEADLINE_SECONDS = 60
REQUEST_TIMEOUT_SECONDS = 30.0


class ScenarioFailed(Exception):
    """An expectation of the scenario itself was not met."""


def script_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "sdk script"


def emit(obj: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def fail(scenario: str, failure: str, **extra: Any) -> NoReturn:
    sys.stderr.write(f"{script_name()} {scenario}: FAILED: {failure}\n")
    emit({"scenario": scenario, "ok": False, "failure": failure, **extra})
    sys.exit(1)


def base_url() -> str:
    """GUARDWIRE_BASE_URL, which must point at 127.0.0.1."""
    url = os.environ.get("GUARDWIRE_BASE_URL")
    if not url:
        raise ScenarioFailed("GUARDWIRE_BASE_URL is not set (e.g. http://127.0.0.1:8080)")
    host = urlparse(url).hostname
    if host != "127.0.0.1":
        raise ScenarioFailed(f"GUARDWIRE_BASE_URL must point at 127.0.0.1, not {host!r}")
    return url


# What every SDK's exceptions are asked for; missing attributes are reported as null.
ERROR_ATTRIBUTES = (
    "message",
    "code",
    "type",
    "param",
    "status",
    "status_code",
    "api_message",
    "body",
    "details",
)


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return repr(value)


def error_fields(e: BaseException, attrs: Iterable[str] = ERROR_ATTRIBUTES) -> Dict[str, Any]:
    """What the SDK made of the error: its class, its module and the attributes it has."""
    out: Dict[str, Any] = {
        "exception": type(e).__name__,
        "exception_module": type(e).__module__,
        "exception_mro": [c.__name__ for c in type(e).__mro__],
    }
    for attr in attrs:
        try:
            value = getattr(e, attr, None)
        except Exception as err:  # noqa: BLE001 - a broken property is worth reporting, not a crash
            value = f"<{attr} raised {type(err).__name__}: {err}>"
        out[attr] = jsonable(value)
    return out


def on_deadline(_signum: int, _frame: Any) -> None:
    raise TimeoutError(f"scenario did not finish within {RUN_DEADLINE_SECONDS}s")


def run(
    argv: List[str],
    scenarios: Mapping[str, Callable[[Any], Dict[str, Any]]],
    make_client: Callable[[], Any],
    versions: Mapping[str, str],
) -> None:
    """Runs the scenario named by argv[1] with a fresh client; prints its one JSON object."""
    if len(argv) != 2 or argv[1] not in scenarios:
        names = ", ".join(scenarios)
        fail(argv[1] if len(argv) > 1 else "", f"usage: {script_name()} <scenario>; scenarios: {names}")
    scenario = argv[1]
    signal.signal(signal.SIGALRM, on_deadline)
    signal.alarm(RUN_DEADLINE_SECONDS)
    try:
        result = scenarios[scenario](make_client())
    except ScenarioFailed as e:
        fail(scenario, str(e))
    except BaseException as e:  # noqa: BLE001 - report anything unexpected as one JSON object
        traceback.print_exc()
        fail(scenario, f"unexpected {type(e).__name__}: {e}", **error_fields(e))
    finally:
        signal.alarm(0)
    emit({"scenario": scenario, "ok": True, **versions, **result})
