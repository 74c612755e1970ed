"""The official Python MCP SDK's Client, through guardwire, for tests/mcp_bounded.rs: calls the
sampling server's `ask` tool, answering the server's sampling requests; prints the call's
outcome and the sampling requests the client saw, as one JSON object.

Usage: sampling_client.py URL
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, TextContent

url = sys.argv[1]


async def main():
    seen = []

    async def on_sampling(context, params):
        seen.append({"id": str(context.request_id), "texts": [m.content.text for m in params.messages]})
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="hello"), model="test-model"
        )

    report = {}
    async with Client(url, mode="legacy", sampling_callback=on_sampling) as client:
        try:
            result = await client.call_tool("ask", {})
            report["ask"] = {"ok": "".join(getattr(c, "text", "") for c in result.content)}
        except MCPError as e:
            report["ask"] = {"error": {"code": e.error.code, "message": e.error.message}}
    report["seen"] = seen
    print(json.dumps(report))


asyncio.run(main())
