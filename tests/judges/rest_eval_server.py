"""A rest_eval endpoint for tests/judges.rs: Python's own HTTP server (http.server), on
127.0.0.1 at a free port it prints first. Scores 0 when `current_output` holds "FORBIDDEN",
else 1; writes each request's headers and JSON body, one JSON line per request, to the file
named by its first argument."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body}) + "\n")
        text = body.get("current_output", "")
        score = 0.0 if "FORBIDDEN" in text else 1.0
        # Prose around the object, and a `passed` that disagrees: PromptKit reads the score.
        reply = ('verdict: {"score": %s, "reasoning": "checked", "passed": true}' % score).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
