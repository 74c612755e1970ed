"""The official Python SDK's Client, for tests/mcp_reading.rs: one action against the URL given,
what the SDK read as one JSON object on stdout ({"ok": ...} or {"error": {"code", "message"}}).

Usage: client.py URL MODE ACTION, MODE the Client's `mode`; ACTION `server_info` (the identity
the SDK read when it connected) or the name of a tool to call (its text blocks joined as the
SDK's own examples join them, with nothing between). The Client answers sampling requests
(`sampling/createMessage`, sent on their own or inside an `input_required` result) with a
callback that records what it was handed — the system prompt and the messages, one per line,
what the client's model would read — under "sampled".
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, TextContent

url, mode, action = sys.argv[1], sys.argv[2], sys.argv[3]


def error(e):
    return {"error": {"code": e.error.code, "message": e.error.message}}


sampled = []


async def on_sampling(context, params):
    texts = [params.system_prompt or ""] + [getattr(m.content, "text", "") for m in params.messages]
    sampled.append("\n".join(texts))
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="ok"), model="m")


async def main():
    try:
        async with Client(url, mode=mode, sampling_callback=on_sampling) as client:
            if action == "server_info":
                info = client.session.server_info
                report = {"ok": info.model_dump(mode="json", exclude_none=True) if info else None}
            else:
                # Caught inside the session: outside it the error comes wrapped in a group.
                try:
                    result = await client.call_tool(action, {})
                    report = {"ok": "".join(getattr(c, "text", "") for c in result.content)}
                except MCPError as e:
                    report = error(e)
    except MCPError as e:
        report = error(e)
    except Exception as e:  # noqa: BLE001 - a failed connect is an outcome too
        causes = getattr(e, "exceptions", [])
        report = {"exception": f"{type(e).__name__}: {e} {[repr(c) for c in causes]}"}
    report["sampled"] = sampled
    print(json.dumps(report))


asyncio.run(main())
