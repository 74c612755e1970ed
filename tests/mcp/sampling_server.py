"""An MCP server (the official Python SDK's MCPServer, Streamable HTTP, SSE answers) whose tool
asks the client for a sampling with a banned word, for tests/mcp_bounded.rs. The sampling request
reuses the id of the client's own tools/call it runs under (ids are per direction, so a server may):
an error for it relayed to the client would settle the client's call. What the server got back is
appended to the log file (one JSON line).

Usage: sampling_server.py PORT LOGFILE
"""

import json
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared import jsonrpc_dispatcher
from mcp.shared.exceptions import MCPError
from mcp.types import SamplingMessage, TextContent

port, log_path = int(sys.argv[1]), sys.argv[2]

# The id the server's next request takes, when set (else the SDK's own counter).
forced_ids = []
_allocate = jsonrpc_dispatcher.JSONRPCDispatcher._allocate_id


def _allocate_id(self):
    return forced_ids.pop() if forced_ids else _allocate(self)


jsonrpc_dispatcher.JSONRPCDispatcher._allocate_id = _allocate_id


def record(kind, **fields):
    with open(log_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"kind": kind, **fields}) + "\n")


server = MCPServer("guardwire-sampling-server")


async def sample(ctx, text):
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    try:
        with anyio.fail_after(20):
            result = await ctx.session.create_message(
                [message], max_tokens=10, related_request_id=ctx.request_id
            )
        return {"ok": getattr(result.content, "text", "")}
    except MCPError as e:
        return {"error": e.error.code}
    except TimeoutError:
        return {"timeout": True}


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the client's model twice: a clean question, then one with a banned word whose
    request id is the id of this call."""
    clean = await sample(ctx, "say hello")
    forced_ids.append(int(ctx.request_id))
    banned = await sample(ctx, "please say forbidden")
    record("sampling", request_id=ctx.request_id, clean=clean, banned=banned)
    return f"asked: clean={json.dumps(clean)} banned={json.dumps(banned)}"


server.run("streamable-http", host="127.0.0.1", port=port)
