#!/usr/bin/env node
// Drives the official `openai` npm package (pinned in package.json / package-lock.json) against
// a running guardwire: Chat Completions and Responses streams.
//
// Run by tests/sdk_node.rs (through tests/run, which runs `npm ci` in this directory):
//
//     GUARDWIRE_BASE_URL=http://127.0.0.1:PORT/v1 node openai.mjs <scenario>
//
// Scenarios:
//   chat_clean_stream                client.chat.completions.create({stream: true}); report the
//                                    assembled text and finish reasons
//   chat_blocked_stream              the same; iterating must throw OpenAI.APIError mid-stream;
//                                    report the text yielded before it and the error's fields
//   responses_clean_stream           client.responses.create({stream: true}); report the text of
//                                    the response.output_text.delta events and the final status
//   responses_clean_stream_helper    client.responses.stream(...); also reports
//                                    finalResponse().output_text
//   responses_blocked_stream         responses.create({stream: true}); must throw
//                                    OpenAI.APIError mid-stream
//   responses_blocked_stream_helper  the same through client.responses.stream(...)
//
// Like the Python scripts (see ../sdk_harness.py): exactly one JSON object on stdout with
// "ok": true/false; on failure the reason goes under "failure" and to stderr, and the exit
// status is 1. Only 127.0.0.1 is ever contacted, and nothing is retried.

import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const MODEL = 'gpt-4o';
const CLEAN_PROMPT = 'Tell me a short story.';
// The whole run must end well before the Rust test gives up.
const RUN_DEADLINE_MS = 60_000;
const REQUEST_TIMEOUT_MS = 30_000;

class ScenarioFailed extends Error {}

function emit(obj) {
  const sorted = Object.fromEntries(Object.entries(obj).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  process.stdout.write(JSON.stringify(sorted) + '\n');
}

function fail(scenario, failure, extra = {}) {
  process.stderr.write(`openai.mjs ${scenario}: FAILED: ${failure}\n`);
  emit({ scenario, ok: false, failure, ...extra });
  process.exitCode = 1;
}

function makeClient() {
  const baseURL = process.env.GUARDWIRE_BASE_URL;
  if (!baseURL) {
    throw new ScenarioFailed('GUARDWIRE_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)');
  }
  const host = new URL(baseURL).hostname;
  if (host !== '127.0.0.1') {
    throw new ScenarioFailed(`GUARDWIRE_BASE_URL must point at 127.0.0.1, not ${JSON.stringify(host)}`);
  }
  return new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0, timeout: REQUEST_TIMEOUT_MS });
}

function jsonable(value) {
  if (value === undefined) return null;
  try {
    return JSON.parse(JSON.stringify(value));
  } catch {
    return String(value);
  }
}

function errorFields(e) {
  const out = {
    exception: e?.constructor?.name ?? typeof e,
    is_api_error: e instanceof OpenAI.APIError,
  };
  for (const attr of ['message', 'code', 'type', 'param', 'status', 'error']) {
    out[attr] = jsonable(e?.[attr]);
  }
  return out;
}

const user = (text) => [{ role: 'user', content: text }];

// ---- scenarios ----

async function chatCollect(client, seen) {
  const stream = await client.chat.completions.create({ model: MODEL, messages: user(CLEAN_PROMPT), stream: true });
  for await (const chunk of stream) {
    seen.chunks += 1;
    for (const choice of chunk.choices) {
      if (choice.delta?.content) seen.text += choice.delta.content;
      if (choice.finish_reason) seen.finish_reasons.push(choice.finish_reason);
    }
  }
}

function responsesAdd(seen, event) {
  seen.events += 1;
  seen.event_types.push(String(event.type));
  if (event.type === 'response.output_text.delta') seen.text += event.delta;
  if (event.type === 'response.completed') seen.status = event.response?.status ?? null;
}

async function responsesCollect(client, seen) {
  const stream = await client.responses.create({ model: MODEL, input: CLEAN_PROMPT, stream: true });
  for await (const event of stream) responsesAdd(seen, event);
}

async function responsesHelperCollect(client, seen) {
  const stream = client.responses.stream({ model: MODEL, input: CLEAN_PROMPT });
  for await (const event of stream) responsesAdd(seen, event);
  const final = await stream.finalResponse();
  seen.final_output_text = final.output_text;
}

async function untilApiError(collect, seen) {
  try {
    await collect(seen);
  } catch (e) {
    if (e instanceof OpenAI.APIError) return { ...seen, ...errorFields(e) };
    throw e;
  }
  throw new ScenarioFailed('the stream ended normally; expected OpenAI.APIError from guardwire\'s error event');
}

const newChat = () => ({ chunks: 0, text: '', finish_reasons: [] });
const newResponses = () => ({ events: 0, event_types: [], text: '', status: null });

const SCENARIOS = {
  chat_clean_stream: async (client) => {
    const seen = newChat();
    await chatCollect(client, seen);
    return seen;
  },
  chat_blocked_stream: (client) => untilApiError((seen) => chatCollect(client, seen), newChat()),
  responses_clean_stream: async (client) => {
    const seen = newResponses();
    await responsesCollect(client, seen);
    return seen;
  },
  responses_clean_stream_helper: async (client) => {
    const seen = newResponses();
    await responsesHelperCollect(client, seen);
    return seen;
  },
  responses_blocked_stream: (client) => untilApiError((seen) => responsesCollect(client, seen), newResponses()),
  responses_blocked_stream_helper: (client) =>
    untilApiError((seen) => responsesHelperCollect(client, seen), newResponses()),
};

async function main(argv) {
  const scenario = argv[2] ?? '';
  if (argv.length !== 3 || !Object.hasOwn(SCENARIOS, scenario)) {
    fail(scenario, `usage: openai.mjs <scenario>; scenarios: ${Object.keys(SCENARIOS).join(', ')}`);
    return;
  }
  const deadline = setTimeout(() => {
    fail(scenario, `scenario did not finish within ${RUN_DEADLINE_MS / 1000}s`);
    process.exit(1);
  }, RUN_DEADLINE_MS);
  try {
    const result = await SCENARIOS[scenario](makeClient());
    emit({ scenario, ok: true, openai_version: VERSION, node_version: process.version, ...result });
  } catch (e) {
    if (e instanceof ScenarioFailed) {
      fail(scenario, e.message);
    } else {
      process.stderr.write(`${e?.stack ?? e}\n`);
      fail(scenario, `unexpected ${e?.constructor?.name ?? typeof e}: ${e?.message ?? e}`, errorFields(e));
    }
  } finally {
    clearTimeout(deadline);
  }
}

await main(process.argv);
