"""An A2A agent for tests/judges.rs, built on the official A2A Python SDK (a2a-sdk) and
uvicorn, on 127.0.0.1 at a free port it prints first. Serves JSON-RPC at /a2a (A2A 1.0
`SendMessage` and, through the SDK's v0.3 compat layer, `message/send`) and the agent card
at /.well-known/agent-card.json. Answers every message with a completed Task whose status
message and artifact hold a JSON verdict: failing when the user's text contains "FORBIDDEN",
else passing. Writes each request's path, Authorization header and JSON body, one JSON line
per request, to the file named by its first argument."""

import json
import logging
import socket
import sys
import uuid

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface
from starlette.applications import Starlette

LOG = sys.argv[1]
logging.disable(logging.CRITICAL)  # keep stdout to the port line alone


class Judge(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        text = context.get_user_input()
        if "FORBIDDEN" in text:
            verdict = {"passed": False, "score": 0.0, "reasoning": "found FORBIDDEN"}
        else:
            verdict = {"passed": True, "score": 1.0, "reasoning": "fine"}
        verdict = json.dumps(verdict)
        # Open a Task, then complete it: PromptKit reads status.message, then artifacts.
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([new_text_part(verdict)], name="verdict")
        await updater.complete(updater.new_agent_message([new_text_part(verdict)]))

    async def cancel(self, context: RequestContext, event_queue) -> None:
        raise NotImplementedError


def logged(app):
    """ASGI middleware: log each request, then replay its body to the app."""

    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        raw = b""
        while True:
            event = await receive()
            raw += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with open(LOG, "a", encoding="utf-8") as log:
            entry = {"path": scope["path"], "authorization": auth and auth.decode(), "body": body}
            log.write(json.dumps(entry) + "\n")
        # The SDK answers -32602 "message.message_id: Field is required" to an empty or
        # missing messageId, which PromptKit's a2a_eval sends (`"messageId": ""`): fill one in.
        # (Parts without "kind" need no help: both the 1.0 and 0.3 parsers accept them.)
        params = body.get("params") if isinstance(body, dict) else None
        message = params.get("message") if isinstance(params, dict) else None
        if isinstance(message, dict) and not message.get("messageId"):
            message["messageId"] = uuid.uuid4().hex
            raw = json.dumps(body).encode()

        pending = [{"type": "http.request", "body": raw, "more_body": False}]

        async def replay():  # the body once, then the client's own events (disconnect)
            return pending.pop() if pending else await receive()

        return await app(scope, replay, send)

    return middleware


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(64)  # connections queue from here on, before uvicorn starts accepting
port = sock.getsockname()[1]

card = AgentCard(
    name="guardwire test judge",
    description="Scores text: fails on FORBIDDEN.",
    version="1.0.0",
    supported_interfaces=[
        AgentInterface(url=f"http://127.0.0.1:{port}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
    ],
    capabilities=AgentCapabilities(streaming=False),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
)
handler = DefaultRequestHandler(agent_executor=Judge(), task_store=InMemoryTaskStore(), agent_card=card)
routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True)
app = logged(Starlette(routes=routes))

print(port, flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off")).run(sockets=[sock])
