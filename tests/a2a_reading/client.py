"""The official A2A Python SDK's client (a2a-sdk) for tests/a2a_reading.rs.

Arguments: guardwire's URL for the scripted agent, then the agent's own URL. Cases, one JSON
line each (the texts the client received and the error it raised):
- "context through": a message whose context_id is the banned phrase, through guardwire;
- "snake direct" / "snake through": a message the agent answers in snake_case (a message with
  `message_id`, `context_id`), straight from the agent (what the SDK reads) and through
  guardwire;
- "artifacts direct" / "artifacts through": a task whose two artifacts hold the two halves of
  the phrase, read with the SDK's own `get_stream_response_text` (which joins a task's
  artifacts);
- "falsy direct" / "falsy through": an answer with a `result` and an empty `error` object,
  which the SDK reads as the result (it tests `if error:`);
- "comment direct" / "comment through" (streaming): an SSE comment line whose U+2028 the
  SDK's line reader (httpx) breaks at, so the `data:` after it is an event to the SDK."""

import asyncio
import json
import sys
import uuid

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_stream_response_text, new_text_part
from a2a.types import Message, Role, SendMessageRequest


async def case(name, url, text, context_id="", streaming=False):
    client = await create_client(url, client_config=ClientConfig(streaming=streaming))
    got, error = [], None
    try:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(text)])
        if context_id:
            message.context_id = context_id
        async for event in client.send_message(SendMessageRequest(message=message)):
            # An event, or (a task's) a pair of the task and its last update.
            response = event[0] if isinstance(event, tuple) else event
            got.append(get_stream_response_text(response))
    except Exception as e:  # noqa: BLE001 - the error is what the test reads
        error = f"{type(e).__name__}: {e}"
    finally:
        await client.close()
    print(json.dumps({"case": name, "text": "".join(got), "error": error}), flush=True)


async def main():
    gw, direct = sys.argv[1], sys.argv[2]
    await case("context through", gw, "hello", context_id="the forbidden fruit")
    await case("snake direct", direct, "LEAK it")
    await case("snake through", gw, "LEAK it")
    await case("artifacts direct", direct, "ARTIFACTS please")
    await case("artifacts through", gw, "ARTIFACTS please")
    await case("falsy direct", direct, "FALSY please")
    await case("falsy through", gw, "FALSY please")
    await case("comment direct", direct, "COMMENT please", streaming=True)
    await case("comment through", gw, "COMMENT please", streaming=True)


asyncio.run(main())
