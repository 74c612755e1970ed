"""The official Python MCP SDK's Client, through guardwire, for tests/mcp.rs: one scenario
against the URL given, its outcome as one JSON object on stdout.

Usage: client.py URL MODE, MODE the Client's `mode` ("legacy": the initialize handshake;
"2026-07-28": the stateless per-request envelope; "auto").
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError

url, mode = sys.argv[1], sys.argv[2]


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def attempt(report, key, coro, read):
    try:
        report[key] = {"ok": read(await coro)}
    except MCPError as e:
        report[key] = {"error": {"code": e.error.code, "message": e.error.message}}
    except Exception as e:  # noqa: BLE001 - anything else is the test's failure to see
        report[key] = {"exception": f"{type(e).__name__}: {e}"}


async def main():
    report = {}
    progress = []

    async def on_progress(done, total, message):
        progress.append({"progress": done, "total": total, "message": message})

    async with Client(url, mode=mode) as client:
        session = client.session
        report["session_id"] = getattr(session, "session_id", None)
        await attempt(report, "tools", client.list_tools(), lambda r: [t.name for t in r.tools])
        await attempt(report, "add", client.call_tool("add", {"a": 2, "b": 3}), text_of)
        await attempt(report, "echo_clean", client.call_tool("echo", {"text": "hello"}), text_of)
        await attempt(
            report, "echo_banned", client.call_tool("echo", {"text": "say forbidden now"}), text_of
        )
        await attempt(report, "leak", client.call_tool("leak", {}), text_of)
        await attempt(
            report,
            "count",
            client.call_tool("count", {"n": 3}, progress_callback=on_progress),
            text_of,
        )
        report["progress"] = progress
        await attempt(
            report,
            "resource_clean",
            client.read_resource("res://clean"),
            lambda r: [c.text for c in r.contents],
        )
        await attempt(
            report,
            "resource_bad",
            client.read_resource("res://bad"),
            lambda r: [c.text for c in r.contents],
        )
        await attempt(
            report,
            "prompt_clean",
            client.get_prompt("greet", {"name": "Ada"}),
            lambda r: [m.content.text for m in r.messages],
        )
        await attempt(
            report,
            "prompt_bad",
            client.get_prompt("bad_prompt", {}),
            lambda r: [m.content.text for m in r.messages],
        )
    print(json.dumps(report))


asyncio.run(main())
