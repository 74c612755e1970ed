// The official TypeScript MCP SDK's Client (StreamableHTTPClientTransport, the initialize
// handshake) through guardwire, for tests/mcp/node.rs: one scenario against the URL given,
// its outcome as one JSON object on stdout (the shape of tests/mcp/client.py's).
//
// Usage: node mcp_client.mjs URL [EXTRA...], EXTRA naming more steps:
//   profile   call the `profile` tool (a violation in structured content only)
//   weather   call `weather`, the tool guardwire removed from the list
//   shell     call `run_shell`, then `add` (session checks)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const [url, ...extra] = process.argv.slice(2);
// The word the guarding pack bans (tests/mcp/node.rs): the echo that says it is refused.
const banned = process.env.GUARDWIRE_BANNED_WORD || 'forbidden';

const report = { structured: {} };
// A result as the text of its content (a tool error flagged); structured content is kept in
// `report.structured`, so that nothing a result carried escapes the test's leak check.
const textOf = (r) => {
  const text = r.content.map((c) => c.text ?? '').join('');
  if (r.structuredContent !== undefined) report.structured[text] = r.structuredContent;
  return r.isError ? { text, isError: true } : text;
};

async function attempt(report, key, fn, read) {
  try {
    report[key] = { ok: read(await fn()) };
  } catch (e) {
    if (e instanceof McpError) {
      report[key] = { error: { code: e.code, message: e.message } };
    } else {
      report[key] = { exception: `${e?.name}: ${e?.message}` };
    }
  }
}

const progress = [];
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: 'guardwire-ts-test-client', version: '1.0.0' });
try {
  await client.connect(transport);
  report.session_id = transport.sessionId ?? null;
  report.protocol_version = transport.protocolVersion ?? null;
  await attempt(report, 'tools', () => client.listTools(), (r) => r.tools.map((t) => t.name));
  const call = (name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
  await attempt(report, 'add', () => call('add', { a: 2, b: 3 }), textOf);
  await attempt(report, 'echo_clean', () => call('echo', { text: 'hello' }), textOf);
  await attempt(report, 'echo_banned', () => call('echo', { text: `say ${banned} now` }), textOf);
  await attempt(report, 'leak', () => call('leak', {}), textOf);
  await attempt(
    report,
    'count',
    () => call('count', { n: 3 }, { onprogress: (p) => progress.push(p) }),
    textOf,
  );
  report.progress = progress;
  const contents = (r) => r.contents.map((c) => c.text);
  await attempt(report, 'resource_clean', () => client.readResource({ uri: 'res://clean' }), contents);
  await attempt(report, 'resource_bad', () => client.readResource({ uri: 'res://bad' }), contents);
  const messages = (r) => r.messages.map((m) => m.content.text);
  await attempt(
    report,
    'prompt_clean',
    () => client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } }),
    messages,
  );
  await attempt(report, 'prompt_bad', () => client.getPrompt({ name: 'bad_prompt', arguments: {} }), messages);
  if (extra.includes('profile')) {
    await attempt(report, 'profile', () => call('profile', { user: 'ada' }), textOf);
  }
  if (extra.includes('weather')) {
    await attempt(report, 'weather', () => call('weather', { city: 'Paris' }), textOf);
  }
  if (extra.includes('shell')) {
    await attempt(report, 'shell', () => call('run_shell', { cmd: 'ls' }), textOf);
  }
  report.session_id_at_end = transport.sessionId ?? null;
  if (transport.sessionId) {
    await attempt(report, 'terminate', () => transport.terminateSession(), () => true);
  }
} catch (e) {
  report.fatal = `${e?.name}: ${e?.message}`;
}
await client.close().catch(() => {});
// Exit at once: idle keep-alive connections would hold the process for seconds.
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0));
