"""HoloDeck's own code as the oracle of `guardwire eval --holodeck` (tests/eval_holodeck.rs).

Reads one JSON document on stdin and writes one on stdout:

  in:  {"agents": [yaml text], "equality": [{"flags": {...}, "a": str, "b": str}],
        "numeric": [{"flags": {...}, "a": str, "b": str}], "paths": [{"path": str, "doc": str}]}
  out: {"version": str, "agents": [null | error text], "equality": [bool],
        "numeric": [bool | null (a side is no number)], "paths": [str | null (no leaf)],
        "valid_paths": [bool]}

Agents: holodeck.models.agent.Agent validating the YAML document (HoloDeck's models, as its
loader builds them). Equality and numeric: the comparisons of HoloDeck's EqualityEvaluator and
NumericEvaluator (lib/evaluators/deterministic.py: `_normalize_text`, `_try_parse_number`, the
tolerance rule). Paths: lib/evaluators/response_path.py's `is_valid_path` and `extract`.
The evaluators package's __init__ imports every evaluator (deepeval, azure-ai-evaluation);
it is replaced by an empty package of the same folder, so only the modules read here load.
"""

import json
import os
import sys
import types
from importlib import metadata

import yaml

import holodeck.lib
from holodeck.models.agent import Agent

_pkg = types.ModuleType("holodeck.lib.evaluators")
_pkg.__path__ = [os.path.join(os.path.dirname(holodeck.lib.__file__), "evaluators")]
sys.modules["holodeck.lib.evaluators"] = _pkg

from holodeck.lib.evaluators import deterministic, response_path  # noqa: E402


def agent(text):
    try:
        Agent.model_validate(yaml.safe_load(text))
        return None
    except Exception as e:  # pydantic's ValidationError, HoloDeck's ConfigError
        return str(e)


def equality(c):
    f = c["flags"]
    norm = lambda s: deterministic._normalize_text(
        s,
        case_insensitive=f.get("case_insensitive", False),
        strip_whitespace=f.get("strip_whitespace", False),
        strip_punctuation=f.get("strip_punctuation", False),
    )
    return norm(c["a"]) == norm(c["b"])


def numeric(c):
    f = c["flags"]
    parse = lambda s: deterministic._try_parse_number(
        s,
        accept_percent=f.get("accept_percent", False),
        accept_thousands_separators=f.get("accept_thousands_separators", False),
    )
    (a, ea), (b, eb) = parse(c["a"]), parse(c["b"])
    if ea is not None or eb is not None or a is None or b is None:
        return None
    abs_tol = f.get("absolute_tolerance", 1e-6)
    rel_tol = f.get("relative_tolerance", 0.0)
    diff = abs(a - b)
    return diff <= abs_tol or (rel_tol > 0 and diff <= rel_tol * abs(b))


def path(c):
    if not response_path.is_valid_path(c["path"]):
        return None
    value, error = response_path.extract(c["doc"], c["path"])
    return None if error is not None else value


def main():
    cases = json.load(sys.stdin)
    out = {
        "version": metadata.version("holodeck-ai"),
        "agents": [agent(t) for t in cases.get("agents", [])],
        "equality": [equality(c) for c in cases.get("equality", [])],
        "numeric": [numeric(c) for c in cases.get("numeric", [])],
        "paths": [path(c) for c in cases.get("paths", [])],
        "valid_paths": [response_path.is_valid_path(c["path"]) for c in cases.get("paths", [])],
    }
    json.dump(out, sys.stdout)


main()
