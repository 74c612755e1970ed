"""An OpenAI-compatible upstream as vLLM, SGLang and LiteLLM serve one: a plain ASGI app under
uvicorn (h11 for HTTP/1.1), for guardwire's interop tests (tests/interop.rs).

    python asgi_upstream.py ANSWERS_DIR

binds 127.0.0.1 on a free port, prints the port on the first line of stdout, and serves until
killed. Every POST is answered with the recorded answer at ANSWERS_DIR/<request path>: under
/whole/ as one JSON body, anywhere else as an SSE stream sent one event per body chunk. A
streamed request with `stream_options.include_usage` gets vLLM's usage-only chunk (no choices;
11 prompt and 17 completion tokens) before `data: [DONE]`, as vLLM sends it. The
response carries the `Host` the server saw (x-upstream-saw-host) and the client's port
(x-upstream-peer), so a test can check the request line and that connections are kept alive.
uvicorn itself answers 400 to an HTTP/1.1 request without `Host`.
"""

import asyncio
import json
import os
import socket
import sys

import uvicorn

ROOT = os.path.realpath(sys.argv[1])


async def read_body(receive):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def answer(send, status, content_type, chunks, extra_headers):
    headers = [(b"content-type", content_type)] + extra_headers
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for i, chunk in enumerate(chunks):
        if i:
            # Let each event leave as its own write, as a model server's tokens do.
            await asyncio.sleep(0.002)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    headers = dict(scope["headers"])
    seen = [
        (b"x-upstream-saw-host", headers.get(b"host", b"")),
        (b"x-upstream-peer", str(scope["client"][1]).encode()),
    ]
    try:
        request = json.loads(body)
    except ValueError:
        error = b'{"error":{"message":"request body is not JSON"}}'
        return await answer(send, 400, b"application/json", [error], seen)
    path = os.path.realpath(os.path.join(ROOT, scope["path"].lstrip("/")))
    if scope["method"] != "POST" or not path.startswith(ROOT + os.sep) or not os.path.isfile(path):
        error = b'{"error":{"message":"no recorded answer here"}}'
        return await answer(send, 404, b"application/json", [error], seen)
    with open(path, "rb") as f:
        recorded = f.read()
    if scope["path"].startswith("/whole/"):
        return await answer(send, 200, b"application/json", [recorded], seen)
    events = [e + b"\n\n" for e in recorded.split(b"\n\n") if e]
    if asks_for_usage(request):
        events = with_usage(events)
    return await answer(send, 200, b"text/event-stream", events, seen)


def asks_for_usage(request):
    options = request.get("stream_options") if isinstance(request, dict) else None
    return isinstance(options, dict) and options.get("include_usage") is True


def with_usage(events):
    """The usage-only chunk vLLM sends before `[DONE]` when asked (its other chunks carry no
    `usage` member: vLLM leaves unset fields out)."""
    usage = {"prompt_tokens": 11, "completion_tokens": 17, "total_tokens": 28}
    first = json.loads(events[0][len(b"data: "):])
    chunk = {k: first[k] for k in ("id", "object", "created", "model") if k in first}
    chunk.update(choices=[], usage=usage)
    line = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
    done = [i for i, e in enumerate(events) if e.startswith(b"data: [DONE]")]
    at = done[0] if done else len(events)
    return events[:at] + [line] + events[at:]


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
