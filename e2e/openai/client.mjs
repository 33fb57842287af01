// Drives our OpenAI door (/v1) with the official npm clients, pinned in
// package-lock.json: the openai package (Responses JSON and streamed, a
// previous_response_id continuation, the SDK's own stream accumulator,
// retrieve, models, a streamed chat completion) and @openai/agents (an
// Agent with one function tool, run and then run streamed against the door
// through the SDK's Responses model). It prints one JSON line,
// {"report": …}; the Go test (e2e/openai_test.go, TestOpenAINPM) checks it
// and what the model stub was sent. Every step's error is caught and reported, so the report says
// how far the script got.
//
// Environment: OAI_URL (the server), OAI_PASSWORD (the API key), OAI_TAG
// (a random word the prompts carry), OAI_AGENT (the agent the requests
// name as their model), OAI_MODEL (a provider/model of the catalog),
// OAI_CITY (what the agent's prompt asks the model to look up).
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import {
  Agent,
  run,
  tool,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from '@openai/agents';
import { z } from 'zod';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const baseURL = env('OAI_URL') + '/v1';
const apiKey = env('OAI_PASSWORD');
const tag = env('OAI_TAG');
const agentName = env('OAI_AGENT');
const catalogModel = env('OAI_MODEL');
const city = env('OAI_CITY');

const version = (p) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${p}/package.json`, import.meta.url), 'utf8')).version;

const report = {
  node: process.version,
  versions: {},
  steps: {},
};
for (const p of ['openai', '@openai/agents', '@openai/agents-core', '@openai/agents-openai', 'zod']) {
  report.versions[p] = version(p);
}

const errText = (e) => {
  if (!e) return '';
  const parts = [`${e.constructor?.name ?? 'Error'}: ${e.message}`];
  if (e.status) parts.push(`status ${e.status}`);
  if (e.error) parts.push(JSON.stringify(e.error));
  return parts.join(' ');
};

// step runs fn, keeping what it returns (or the error) under name.
async function step(name, fn) {
  const out = {};
  report.steps[name] = out;
  try {
    Object.assign(out, await fn(out));
  } catch (e) {
    out.error = errText(e);
  }
  return out;
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

// textOf is a response's text as its output items hold it (the SDK adds
// output_text to the responses it returns, not to those in stream events).
const textOf = (r) =>
  (r.output ?? [])
    .filter((it) => it.type === 'message')
    .flatMap((it) => it.content ?? [])
    .filter((c) => c.type === 'output_text')
    .map((c) => c.text)
    .join('');

// brief is what the test reads of a response.
const brief = (r) => ({
  id: r.id,
  object: r.object,
  status: r.status,
  conversation: r.conversation?.id ?? '',
  previousResponseId: r.previous_response_id ?? '',
  outputText: textOf(r),
  sdkOutputText: r.output_text ?? null,
  outputTypes: (r.output ?? []).map((it) => it.type),
  outputIds: (r.output ?? []).map((it) => it.id),
  usage: r.usage ?? null,
  model: r.model,
});

// 1. Responses, JSON.
const first = await step('create', async () => {
  const r = await client.responses.create({ model: agentName, input: `first ${tag}` });
  return brief(r);
});

// 2. Responses, streamed (the raw events, as the SDK's iterator hands
// them over), continuing the first by previous_response_id.
const streamed = await step('stream', async (out) => {
  const s = await client.responses.create({
    model: agentName,
    input: `second ${tag}`,
    previous_response_id: first.id,
    stream: true,
  });
  out.events = [];
  let deltas = '';
  const doneTexts = [];
  for await (const ev of s) {
    out.events.push({
      type: ev.type,
      seq: ev.sequence_number,
      outputIndex: ev.output_index ?? null,
      itemId: ev.item_id ?? ev.item?.id ?? null,
      hasError: Object.hasOwn(ev, 'error'),
    });
    if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    if (ev.type === 'response.output_text.done') doneTexts.push(ev.text);
    if (ev.type === 'response.created') out.created = brief(ev.response);
    if (ev.type === 'response.completed') out.completed = brief(ev.response);
  }
  out.deltas = deltas;
  out.doneTexts = doneTexts;
  return out;
});

// 3. The SDK's stream helper, which rebuilds the response from the events
// and throws on any that do not fit (an item it was not told of, a
// completed response that lost one): its final response must be ours.
const helper = await step('streamHelper', async (out) => {
  const s = client.responses.stream({ model: agentName, input: `third ${tag}`, previous_response_id: streamed.completed?.id });
  out.types = [];
  s.on('event', (ev) => out.types.push(ev.type));
  const r = await s.finalResponse();
  out.final = brief(r);
  return out;
});

// 4. GET /v1/responses/{id} of the streamed response.
await step('retrieve', async () => brief(await client.responses.retrieve(streamed.completed?.id ?? 'none')));

// 4b. GET /v1/responses/{id}/input_items of the first, through the pager.
await step('inputItems', async () => {
  const items = [];
  for await (const it of client.responses.inputItems.list(first.id ?? 'none')) {
    items.push({ id: it.id, type: it.type, role: it.role, text: (it.content ?? []).map((c) => c.text).join('') });
  }
  return { items };
});

// 4c. Refusals as the SDK's error classes: an unknown model (streamed or
// not), a wrong API key.
await step('errors', async () => {
  const caught = async (fn) => {
    try {
      await fn();
      return { class: 'none' };
    } catch (e) {
      return { class: e.constructor?.name ?? '', status: e.status ?? 0, type: e.type ?? '', param: e.param ?? '', code: e.code ?? '', message: e.message };
    }
  };
  return {
    unknownModel: await caught(() => client.responses.create({ model: 'nope/none', input: 'hi' })),
    unknownModelStream: await caught(async () => {
      for await (const _ of await client.responses.create({ model: 'nope/none', input: 'hi', stream: true }));
    }),
    badKey: await caught(() => new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 }).models.list()),
  };
});

// 5. GET /v1/models, through the SDK's pager.
await step('models', async () => {
  const models = [];
  for await (const m of client.models.list()) models.push({ id: m.id, object: m.object, owned_by: m.owned_by });
  return { models };
});

// 6. A streamed chat completion (a new session: no OpenCode-Session).
await step('chat', async (out) => {
  const { data: s, response } = await client.chat.completions
    .create({
      model: catalogModel,
      messages: [{ role: 'user', content: `chat ${tag}` }],
      stream: true,
      stream_options: { include_usage: true },
    })
    .withResponse();
  out.session = response.headers.get('opencode-session') ?? '';
  out.chunks = 0;
  out.content = '';
  out.ids = [];
  out.finishReasons = [];
  for await (const c of s) {
    out.chunks++;
    if (!out.ids.includes(c.id)) out.ids.push(c.id);
    out.object = c.object;
    for (const ch of c.choices) {
      out.content += ch.delta?.content ?? '';
      if (ch.finish_reason) out.finishReasons.push(ch.finish_reason);
    }
    if (c.usage) out.usage = c.usage;
  }
  return out;
});

// 7. @openai/agents: an Agent with one function tool, on the SDK's
// Responses model with our server as its OpenAI client. The door keeps the
// conversation (a response is a turn of a session): the runs continue the
// session by previousResponseId or conversationId, so the SDK sends only
// what is new each call (its prompt, then the tool's output).
setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 }));
setOpenAIAPI('responses');
setTracingDisabled(true);

// toolCalls are get_weather's runs, for the report of the run they are in.
let toolCalls = [];
const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city: c }) => {
    const out = `${c}: 21C and sunny (${tag})`;
    toolCalls.push({ args: { city: c }, output: out });
    return out;
  },
});

const instructions = 'Answer with the weather the get_weather tool gives.';
const agent = new Agent({ name: 'Weather', instructions, model: agentName, tools: [getWeather] });

// agentRun runs the agent on a prompt that has the stub call get_weather
// for where, in the session that keeps the conversation (the SDK's
// previousResponseId or conversationId, as session gives); streamed, it
// keeps what the stream handed over.
async function agentRun(out, where, session, stream, history) {
  toolCalls = [];
  const prompt = `call:get_weather {"city":${JSON.stringify(where)}} what is the weather in ${where}?`;
  Object.assign(out, { prompt, instructions, city: where, previousResponseId: '', conversationId: '' }, session);
  // Stateless (no previousResponseId, no conversationId), a next run is
  // given the conversation so far: the SDK sends all of it each call.
  const input = history ? [...history, { type: 'message', role: 'user', content: prompt }] : prompt;
  let result;
  if (stream) {
    result = await run(agent, input, { ...session, stream: true });
    out.runItems = [];
    out.modelEvents = [];
    out.textDeltas = '';
    for await (const ev of result) {
      if (ev.type === 'run_item_stream_event') out.runItems.push(ev.name);
      if (ev.type === 'raw_model_stream_event' && ev.data.type === 'model') out.modelEvents.push(ev.data.event.type);
      if (ev.type === 'raw_model_stream_event' && ev.data.type === 'output_text_delta') out.textDeltas += ev.data.delta;
    }
    await result.completed;
    if (result.error) throw result.error;
  } else {
    result = await run(agent, input, session);
  }
  out.history = result.history;
  out.finalOutput = result.finalOutput;
  out.lastResponseId = result.lastResponseId ?? '';
  out.rawResponses = result.rawResponses.map((r) => ({
    responseId: r.responseId ?? '',
    output: r.output.map((it) => ({ type: it.type, name: it.name ?? '', callId: it.callId ?? '', arguments: it.arguments ?? '', id: it.id ?? '' })),
  }));
  out.newItems = result.newItems.map((it) => it.type);
  out.toolCalls = toolCalls;
  // The door's answer for the run's last response: its session.
  out.last = brief(await client.responses.retrieve(out.lastResponseId));
  return out;
}

// The run continues the session's last response (an earlier one would
// fork the session); the streamed run names the session as its
// conversation.
await step('agent', (out) => agentRun(out, city, { previousResponseId: helper.final?.id }, false));
await step('agentStream', (out) => agentRun(out, `${city}-streamed`, { conversationId: first.conversation }, true));

// The SDK's default, stateless mode: neither previousResponseId nor
// conversationId, so each model call sends the whole conversation as
// input (the prompt, then the function_call item and its output with it).
// The door finds the session by what the input holds (the call waiting
// there; our assistant message's msg_ ID) and stores nothing twice; the
// next run is given the first one's history and one more prompt.
const stateless = await step('agentStateless', (out) => agentRun(out, `${city}-stateless`, {}, false));
await step('agentStatelessAgain', (out) => agentRun(out, `${city}-stateless-again`, {}, false, stateless.history ?? []));
for (const name of ['agent', 'agentStream', 'agentStateless', 'agentStatelessAgain']) delete report.steps[name]?.history;

// 8. A function tool round trip through the openai package's stream
// helper (its accumulator checks the function_call item's events too): the
// call, then its output sent back in the session.
await step('toolStreamHelper', async (out) => {
  const where = `${city}-helper`;
  const tools = [{
    type: 'function',
    name: 'get_weather',
    description: 'The weather in a city',
    strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  }];
  const s1 = client.responses.stream({
    model: agentName,
    conversation: first.conversation,
    tools,
    input: `call:get_weather {"city":${JSON.stringify(where)}}`,
  });
  out.callTypes = [];
  s1.on('event', (ev) => out.callTypes.push(ev.type));
  const r1 = await s1.finalResponse();
  out.call = brief(r1);
  const fc = r1.output.find((it) => it.type === 'function_call');
  out.fc = fc ?? null;
  out.toolOutput = `${where}: cloudy (${tag})`;
  const s2 = client.responses.stream({
    model: agentName,
    previous_response_id: r1.id,
    tools,
    input: [{ type: 'function_call_output', call_id: fc?.call_id ?? 'none', output: out.toolOutput }],
  });
  out.answerTypes = [];
  s2.on('event', (ev) => out.answerTypes.push(ev.type));
  out.answer = brief(await s2.finalResponse());
  return out;
});

process.stdout.write(JSON.stringify({ report }) + '\n');
