"""An A2A agent for tests/a2a.rs, built on the official A2A Python SDK (a2a-sdk) and uvicorn,
on 127.0.0.1 at a free port it prints first. Serves JSON-RPC at /a2a with an A2A 1.0 card at
/.well-known/agent-card.json, and the same agent at /v03/a2a with a 0.3 card (`url`,
`protocolVersion: 0.3.0`) at /v03/.well-known/agent-card.json, so that the SDK's client speaks
the 0.3 method names to it. Answers every message with an artifact streamed in appended
chunks: "hello from the agent", or, when the message says LEAK, a phrase the test bans split
between two chunks. Writes every request (method, path, JSON body) as one JSON line to the
file named by its first argument: the agent's own record of what reached it."""

import asyncio
import json
import logging
import socket
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

LOG = sys.argv[1]
logging.disable(logging.CRITICAL)  # keep stdout to the port line alone


class Chunky(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        text = context.get_user_input()
        chunks = ["the forbid", "den fruit is here"] if "LEAK" in text else ["hello ", "from ", "the agent"]
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        for i, chunk in enumerate(chunks):
            await updater.add_artifact(
                [new_text_part(chunk)],
                artifact_id="answer",
                name="answer",
                append=i > 0,
                last_chunk=i == len(chunks) - 1,
            )
            await asyncio.sleep(0.02)  # each chunk its own event on the wire
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue) -> None:
        raise NotImplementedError


def logged(app):
    """ASGI middleware: record each request, then replay its body to the app."""

    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        raw = b""
        while True:
            event = await receive()
            raw += event.get("body", b"")
            if not event.get("more_body"):
                break
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"method": scope["method"], "path": scope["path"], "body": body}) + "\n")
        pending = [{"type": "http.request", "body": raw, "more_body": False}]

        async def replay():  # the body once, then the client's own events (disconnect)
            return pending.pop() if pending else await receive()

        return await app(scope, replay, send)

    return middleware


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(64)  # connections queue from here on, before uvicorn starts accepting
port = sock.getsockname()[1]
base = f"http://127.0.0.1:{port}"

card = AgentCard(
    name="guardwire test agent",
    description="Streams its answer in chunks.",
    version="1.0.0",
    supported_interfaces=[AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")],
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
)
card_v03 = {
    "name": "guardwire test agent (0.3)",
    "description": "Streams its answer in chunks.",
    "version": "1.0.0",
    "url": f"{base}/v03/a2a",
    "preferredTransport": "JSONRPC",
    "protocolVersion": "0.3.0",
    "capabilities": {"streaming": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}


async def v03_card(request):
    return JSONResponse(card_v03)


handler = DefaultRequestHandler(agent_executor=Chunky(), task_store=InMemoryTaskStore(), agent_card=card)
routes = (
    create_agent_card_routes(card)
    + create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True)
    + create_jsonrpc_routes(handler, "/v03/a2a", enable_v0_3_compat=True)
    + [Route("/v03/.well-known/agent-card.json", v03_card)]
)
app = logged(Starlette(routes=routes))

print(port, flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off")).run(sockets=[sock])
