"""The official Python MCP SDK's Client through guardwire to a server that answers in UTF-16,
for tests/mcp.rs: calls the tools `clean` and `banned`, prints what it read as one JSON object.

Usage: charset_client.py URL
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError


async def main():
    report = {}
    async with Client(sys.argv[1], mode="legacy") as client:
        for name in ["clean", "banned"]:
            try:
                result = await client.call_tool(name, {})
                report[name] = {"ok": "".join(getattr(c, "text", "") for c in result.content)}
            except MCPError as e:
                report[name] = {"error": {"code": e.error.code, "message": e.error.message}}
    print(json.dumps(report))


asyncio.run(main())
