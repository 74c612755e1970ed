"""The official A2A Python SDK's client (a2a-sdk) against guardwire, for tests/a2a.rs.

Arguments: guardwire's URL for an agent with an A2A 1.0 card, then for one with a 0.3 card.
For each, the client resolves the card through guardwire (`create_client`) and sends, streamed
and not: a clean message, one that makes the agent leak a banned phrase, and one that says
the banned phrase itself; then reads a clean task back (GetTask, 0.3 tasks/get) and, on 1.0,
lists every task with its artifacts (ListTasks), the leaking ones among them. Prints one JSON
line per case: the card's interface URLs, or the texts the client received and the error it
raised (type and message)."""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.helpers.proto_helpers import new_text_part
from a2a.types import GetTaskRequest, ListTasksRequest, Message, Role, SendMessageRequest


def texts_of(event):
    """The texts a StreamResponse carries: artifacts, status and reply messages."""
    out = []
    if event.HasField("artifact_update"):
        out += [p.text for p in event.artifact_update.artifact.parts if p.HasField("text")]
    if event.HasField("task"):
        for a in event.task.artifacts:
            out += [p.text for p in a.parts if p.HasField("text")]
    if event.HasField("status_update"):
        out += [p.text for p in event.status_update.status.message.parts if p.HasField("text")]
    if event.HasField("message"):
        out += [p.text for p in event.message.parts if p.HasField("text")]
    return out


async def case(name, url, streaming, text, then=None):
    """Sends `text`; `then(client, task_id)`, when given, runs next on the same client."""
    client = await create_client(url, client_config=ClientConfig(streaming=streaming))
    got, error, task_id = [], None, None
    try:
        request = SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(text)])
        )
        async for event in client.send_message(request):
            got += texts_of(event)
            if event.HasField("task"):
                task_id = event.task.id
    except Exception as e:  # noqa: BLE001 - the error is what the test reads
        error = f"{type(e).__name__}: {e}"
    print(json.dumps({"case": name, "text": "".join(got), "error": error}), flush=True)
    try:
        if then:
            await then(client, task_id)
    finally:
        await client.close()


async def outcome(name, call):
    """Prints what `call` (a coroutine giving a task or a task list) returned, or raised."""
    text, error = "", None
    try:
        result = await call
        tasks = result.tasks if hasattr(result, "tasks") else [result]
        text = "".join(p.text for t in tasks for a in t.artifacts for p in a.parts if p.HasField("text"))
    except Exception as e:  # noqa: BLE001 - the error is what the test reads
        error = f"{type(e).__name__}: {e}"
    print(json.dumps({"case": name, "text": text, "error": error}), flush=True)


async def main():
    for version, url in [("v1", sys.argv[1]), ("v03", sys.argv[2])]:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, url).get_agent_card()
        print(json.dumps({"case": f"{version} card", "urls": [i.url for i in card.supported_interfaces]}), flush=True)
        for streaming, label in [(True, "streamed"), (False, "whole")]:
            await case(f"{version} {label} clean", url, streaming, "say hello")
            await case(f"{version} {label} leak", url, streaming, "LEAK it")
            await case(f"{version} {label} banned input", url, streaming, "tell me of the forbidden fruit")

        # A clean task read back (GetTask / tasks/get) comes through whole...
        async def get_clean(client, task_id):
            await outcome(f"{version} get clean", client.get_task(GetTaskRequest(id=task_id)))

        await case(f"{version} whole clean again", url, False, "say hello", get_clean)
        # ...and the tasks that leaked, listed with their artifacts, do not.
        if version == "v1":

            async def list_all(client, _):
                await outcome("v1 list", client.list_tasks(ListTasksRequest(include_artifacts=True)))

            await case("v1 whole clean last", url, False, "say hello", list_all)


asyncio.run(main())
