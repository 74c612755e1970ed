// An upstream served by Node's own `http` (or, with --tls CERT KEY, `https`) server, for
// guardwire's interop tests (tests/interop.rs):
//
//     node node_upstream.mjs ANSWERS_DIR [--tls CERT_PEM KEY_PEM]
//
// listens on 127.0.0.1, a free port, printed as the first line of stdout. Every POST is
// answered with the recorded answer at ANSWERS_DIR/<request path>: under /whole/ as one JSON
// body, anywhere else as an SSE stream written one event at a time. A streamed request with
// `stream_options.include_usage` is answered as OpenAI answers it: `"usage":null` in every chunk
// and a usage-only chunk (no choices; 13 prompt and 19 completion tokens) before `data: [DONE]`.
// The response carries the
// `Host` the server saw (x-upstream-saw-host), the client's port (x-upstream-peer) and how many
// connections the server has accepted (x-upstream-connections). Node's server keeps its
// default `requireHostHeader: true`: an HTTP/1.1 request without `Host` gets 400. The https
// server offers no ALPN, so clients speak HTTP/1.1 over TLS.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const root = fs.realpathSync(process.argv[2]);
const tls = process.argv[3] === '--tls'
  ? { cert: fs.readFileSync(process.argv[4]), key: fs.readFileSync(process.argv[5]) }
  : null;
let connections = 0;

async function handle(req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const seen = {
    'x-upstream-saw-host': req.headers.host ?? '',
    'x-upstream-peer': String(req.socket.remotePort),
    'x-upstream-connections': String(connections),
  };
  let request;
  try {
    request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    res.writeHead(400, { 'content-type': 'application/json', ...seen });
    return res.end('{"error":{"message":"request body is not JSON"}}');
  }
  const url = new URL(req.url, 'http://unused');
  const file = path.resolve(root, '.' + decodeURIComponent(url.pathname));
  if (req.method !== 'POST' || !file.startsWith(root + path.sep) || !fs.existsSync(file)) {
    res.writeHead(404, { 'content-type': 'application/json', ...seen });
    return res.end('{"error":{"message":"no recorded answer here"}}');
  }
  const recorded = fs.readFileSync(file);
  if (url.pathname.startsWith('/whole/')) {
    res.writeHead(200, { 'content-type': 'application/json', ...seen });
    return res.end(recorded);
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', ...seen });
  let events = recorded.toString('utf8').split('\n\n').filter((e) => e);
  if (request?.stream_options?.include_usage === true) events = withUsage(events);
  for (const [i, event] of events.entries()) {
    if (i) await sleep(2); // each event its own write, as a model server's tokens are
    res.write(event + '\n\n');
  }
  res.end();
}

function withUsage(events) {
  const out = [];
  for (const event of events) {
    if (event.startsWith('data: [DONE]')) {
      const first = JSON.parse(events[0].slice('data: '.length));
      const usage = { prompt_tokens: 13, completion_tokens: 19, total_tokens: 32 };
      out.push('data: ' + JSON.stringify({ id: first.id, object: first.object, choices: [], usage }));
      out.push(event);
    } else if (event.startsWith('data: ')) {
      out.push('data: ' + JSON.stringify({ ...JSON.parse(event.slice('data: '.length)), usage: null }));
    } else {
      out.push(event);
    }
  }
  return out;
}

const onRequest = (req, res) => handle(req, res).catch((e) => { console.error(e); res.destroy(); });
const server = tls ? https.createServer(tls, onRequest) : http.createServer(onRequest);
server.on(tls ? 'secureConnection' : 'connection', () => { connections += 1; });
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
