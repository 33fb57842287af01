// Drives our AG-UI front door (POST /agui) with the official AG-UI client,
// @ag-ui/client's HttpAgent (the version pinned in package.json), and
// prints what it saw as JSON lines on stdout; e2e/agui_test.go (TestAGUI)
// runs it and asserts on the last line, the report.
//
// Environment:
//   AGUI_URL       the server's base URL (http://127.0.0.1:PORT)
//   AGUI_PASSWORD  optional: the server's password (basic auth, user opencode)
//   AGUI_PAUSE     "1": pause at the TUI checkpoints (below) until a line
//                  arrives on stdin
//   AGUI_TAG       a random tag the prompts carry, so the test can find them
//
// With AGUI_AGENT, AGUI_THREAD and AGUI_PROMPT the script makes one run
// instead (agentRun, e2e/agents_doors_test.go): a prompt to that agent on
// that session, then (AGUI_SLOW) a steer posted into its running turn.
//
// Checkpoints: at {"pause":NAME,...} on stdout the script waits for one
// line on stdin; the test attaches the TUI at "attach" (after the first
// run) and looks at it at "look" (after the second).
//
// Every run goes through HttpAgent.runAgent, so the client's own verifier
// judges each stream (a violation rejects runAgent: the run's verifyError).
// The response body is also teed before the client reads it: every frame is
// checked as it arrived on the wire (SSE: `data: <json>` blocks, LF only;
// protobuf: 4-byte big-endian length + an @ag-ui/proto Event) and every
// event is validated with @ag-ui/core's EventSchema (schemaErrors). What the
// client logs with console.warn or console.error (enforcement stripping
// unknown material, an event naming an unknown message) is in warnings.
// What the events say is for the Go test to judge.

import { randomUUID, getRandomValues } from "node:crypto";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { EventEncoder } from "@ag-ui/encoder";
import * as proto from "@ag-ui/proto";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const BASE = env("AGUI_URL");
const PASSWORD = process.env.AGUI_PASSWORD || "";
const PAUSE = process.env.AGUI_PAUSE === "1";
const TAG = env("AGUI_TAG");
const TIMEOUT = Number(process.env.AGUI_TIMEOUT_MS) || 60_000; // one run

const version = (pkg) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), "utf8")).version;

const headers = PASSWORD ? { Authorization: "Basic " + Buffer.from("opencode:" + PASSWORD).toString("base64") } : {};

// What the client library says with console.warn/console.error.
const warnings = [];
for (const level of ["warn", "error"]) {
  const orig = console[level];
  console[level] = (...args) => {
    warnings.push(`${level}: ` + args.map((a) => (typeof a === "string" ? a : a instanceof Error ? a.stack : JSON.stringify(a))).join(" "));
    orig(...args);
  };
}
const log = (...a) => process.stderr.write(a.join(" ") + "\n");

// sessionID mints a session ID as identifier.NewSession does: "ses_", 12
// hex digits of the complement of (ms<<12 | counter) in 48 bits (newer
// sorts first), 14 random base62 characters.
function sessionID() {
  const mask = (1n << 48n) - 1n;
  const v = ~(BigInt(Date.now()) * 0x1000n + 1n) & mask;
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const rnd = getRandomValues(new Uint8Array(14));
  return "ses_" + v.toString(16).padStart(12, "0") + Array.from(rnd, (b) => alphabet[b % 62]).join("");
}

async function http(method, path, body) {
  const res = await fetch(BASE + path, {
    method,
    headers: { ...headers, ...(body !== undefined && { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}

// conversation is GET /session/{id}/message, reduced to what the test reads.
async function conversation(threadId) {
  const r = await http("GET", `/session/${threadId}/message`);
  if (r.status !== 200) return { status: r.status, messages: [] };
  return {
    status: r.status,
    messages: r.json.map((m) => ({
      id: m.info.id,
      role: m.info.role,
      parentID: m.info.parentID,
      finish: m.info.finish,
      error: m.info.error,
      parts: m.parts.map((p) => ({
        id: p.id,
        type: p.type,
        text: p.text,
        synthetic: p.synthetic,
        metadata: p.metadata,
        tool: p.tool,
        callID: p.callID,
        status: p.state?.status,
        output: p.state?.output,
      })),
    })),
  };
}

// recorder is an HttpAgent fetch that keeps the request and tees the
// response body, so the frames are read as they came off the wire.
function recorder() {
  const rec = { request: null, status: 0, contentType: "", raw: null, rawDone: null };
  rec.fetch = async (url, init) => {
    rec.request = { url: String(url), accept: new Headers(init.headers).get("accept"), body: JSON.parse(init.body) };
    const res = await fetch(url, init);
    rec.status = res.status;
    rec.contentType = res.headers.get("content-type") || "";
    if (!res.body) return res;
    const [mine, theirs] = res.body.tee();
    rec.rawDone = (async () => {
      const chunks = [];
      const reader = mine.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(value);
        }
      } catch (e) {
        rec.readError = String(e);
      }
      rec.raw = Buffer.concat(chunks);
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return rec;
}

// wireEvents splits a response body into events and says what is wrong
// with its framing.
function wireEvents(contentType, raw) {
  const events = [];
  const wireErrors = [];
  if (contentType === proto.AGUI_MEDIA_TYPE) {
    let off = 0;
    while (off < raw.length) {
      if (raw.length - off < 4) {
        wireErrors.push(`${raw.length - off} trailing bytes, no whole length prefix`);
        break;
      }
      const n = raw.readUInt32BE(off);
      if (off + 4 + n > raw.length) {
        wireErrors.push(`frame at byte ${off} declares ${n} bytes, ${raw.length - off - 4} left`);
        break;
      }
      try {
        events.push(proto.decode(new Uint8Array(raw.subarray(off + 4, off + 4 + n))));
      } catch (e) {
        wireErrors.push(`frame at byte ${off}: @ag-ui/proto decode: ${e}`);
      }
      off += 4 + n;
    }
    return { events, wireErrors };
  }
  const text = raw.toString("utf8");
  if (text.includes("\r")) wireErrors.push("CR in the SSE stream (AG-UI frames are LF only)");
  if (text.length > 0 && !text.endsWith("\n\n")) wireErrors.push(`stream does not end with a blank line: …${JSON.stringify(text.slice(-40))}`);
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("data: ")) data.push(line.slice(6));
      else if (line.startsWith(":")) continue; // an SSE comment (keep-alive)
      else wireErrors.push(`a line other than data: in a frame: ${JSON.stringify(line.slice(0, 120))}`);
    }
    if (data.length === 0) continue;
    try {
      events.push(JSON.parse(data.join("\n")));
    } catch (e) {
      wireErrors.push(`frame is not JSON: ${JSON.stringify(data.join("\n").slice(0, 200))}`);
    }
  }
  return { events, wireErrors };
}

function within(what, p, ms = TIMEOUT) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// ProtoAgent asks for AG-UI's protobuf encoding: HttpAgent always sends
// Accept: text/event-stream (requestInit is its documented override point)
// and picks its parser by the response's Content-Type.
class ProtoAgent extends HttpAgent {
  requestInit(input) {
    const init = super.requestInit(input);
    return { ...init, headers: { ...init.headers, Accept: new EventEncoder({ accept: proto.AGUI_MEDIA_TYPE }).getContentType() } };
  }
}

function newAgent(threadId, { messages = [], path = false, Agent = HttpAgent } = {}) {
  const rec = recorder();
  const agent = new Agent({
    url: BASE + (path ? `/agui/${threadId}` : "/agui"),
    headers,
    threadId,
    initialMessages: messages,
    fetch: rec.fetch,
  });
  agent.rec = rec;
  return agent;
}

// run is one agent.runAgent, observed: the events the client handed its
// subscriber, the frames on the wire, the conversation over HTTP before and
// after. onEvent, if given, sees each client event as it arrives.
async function run(label, agent, params = {}, { onEvent } = {}) {
  const threadId = agent.threadId;
  const before = await conversation(threadId);
  const clientEvents = [];
  const warned = warnings.length;
  const rec = agent.rec;
  rec.raw = rec.rawDone = rec.request = rec.readError = null;
  const out = { label, threadId, httpBefore: before.messages, httpBeforeStatus: before.status };
  const t0 = Date.now();
  try {
    const res = await within(`${label}: runAgent`, agent.runAgent(params, {
      onEvent: ({ event }) => {
        clientEvents.push(event);
        onEvent?.(event);
      },
    }));
    out.result = res.result ?? null;
    out.newMessages = res.newMessages;
  } catch (e) {
    out.verifyError = String(e?.stack || e);
    agent.abortRun?.();
  }
  out.ms = Date.now() - t0;
  if (rec.rawDone) await within(`${label}: read the body`, rec.rawDone, 10_000).catch((e) => (rec.readError = String(e)));
  out.request = rec.request;
  out.status = rec.status;
  out.contentType = rec.contentType;
  out.readError = rec.readError;
  const { events, wireErrors } = wireEvents(rec.contentType, rec.raw ?? Buffer.alloc(0));
  out.events = events;
  out.wireErrors = wireErrors;
  out.schemaErrors = [];
  events.forEach((ev, i) => {
    const r = EventSchema.safeParse(ev);
    if (!r.success) out.schemaErrors.push({ index: i, type: ev?.type, issues: r.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`) });
  });
  out.clientEventTypes = clientEvents.map((e) => e.type);
  out.messagesAfter = structuredClone(agent.messages);
  out.pendingInterrupts = structuredClone(agent.pendingInterrupts ?? []);
  out.warnings = warnings.slice(warned);
  const after = await conversation(threadId);
  out.httpAfter = after.messages;
  log(`${label}: ${out.ms} ms, ${events.length} events (${out.clientEventTypes.length} handed over), ${out.verifyError ? "FAILED " + out.verifyError.split("\n")[0] : "ok"}`);
  return out;
}

const user = (content) => ({ id: randomUUID(), role: "user", content });

let stdinLines;
async function pause(name, extra = {}) {
  if (!PAUSE) return;
  process.stdout.write(JSON.stringify({ pause: name, ...extra }) + "\n");
  stdinLines ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const { done } = await stdinLines.next();
  if (done) throw new Error(`stdin closed at the checkpoint ${name}`);
}

const report = {
  versions: Object.fromEntries(["@ag-ui/client", "@ag-ui/core", "@ag-ui/encoder", "@ag-ui/proto"].map((p) => [p, version(p)])),
  tag: TAG,
  runs: {},
};

async function main() {
  const threadId = sessionID();
  report.threadId = threadId;
  report.sessionBefore = (await http("GET", `/session/${threadId}`)).status;

  // (a) a new thread: the unknown ses_ ID becomes the session.
  const agent = newAgent(threadId);
  const first = user(`first agui prompt ${TAG}`);
  agent.addMessage(first);
  const context = [{ description: "the page the user is on", value: `ctx-${TAG}` }];
  report.runs.first = await run("first", agent, { context });
  report.firstClientMessageId = first.id;
  report.sessionAfter = (await http("GET", `/session/${threadId}`)).status;

  await pause("attach", { threadId, text: first.content });

  // (b) the same thread again: the agent sends its whole history (the
  // snapshot's canonical IDs now) and one new message.
  const second = user(`second agui prompt ${TAG}`);
  agent.addMessage(second);
  report.runs.second = await run("second", agent);
  report.secondClientMessageId = second.id;

  await pause("look", { threadId, text: second.content });

  // (g) the same inputs again, each as a client would resend it after a
  // lost response: the same runId and messages; nothing new is admitted.
  const firstIn = report.runs.first.request.body;
  const again = newAgent(threadId, { messages: firstIn.messages });
  report.runs.repeatFirst = await run("repeatFirst", again, { runId: firstIn.runId, context: firstIn.context });
  const secondIn = report.runs.second.request.body;
  const again2 = newAgent(threadId, { messages: secondIn.messages });
  again2.state = structuredClone(secondIn.state);
  report.runs.repeatSecond = await run("repeatSecond", again2, { runId: secondIn.runId });

  // (c) a backend tool turn (two calls in one step: glob, and todowrite,
  // which changes the session's todo list).
  const todos = [
    { content: `Read the files ${TAG}`, status: "in_progress", priority: "high" },
    { content: "Ship it", status: "pending", priority: "low" },
  ];
  agent.addMessage(user(`call:glob {"pattern":"*.md"} call:todowrite ${JSON.stringify({ todos })} then: listed-${TAG}`));
  report.runs.backendTool = await run("backendTool", agent);

  // (d) a frontend tool: the run ends with the call pending; the client
  // answers it in the next run's messages and the turn goes on.
  const tools = [
    {
      name: "confirm_choice",
      description: "Ask the user to confirm a choice in the page",
      parameters: { type: "object", properties: { choice: { type: "string" } }, required: ["choice"] },
    },
  ];
  agent.addMessage(user(`call:confirm_choice {"choice":"blue-${TAG}"} then: confirmed-${TAG}`));
  const ft = await run("frontendTool", agent, { tools });
  report.runs.frontendTool = ft;
  const finished = ft.events.find((e) => e.type === "RUN_FINISHED");
  const pending = finished?.outcome?.pendingToolCallIds ?? [];
  report.frontendToolResult = `the user confirmed blue-${TAG}`;
  for (const toolCallId of pending) {
    agent.addMessage({ id: randomUUID(), role: "tool", toolCallId, content: report.frontendToolResult });
  }
  report.runs.frontendToolResult = await run("frontendToolResult", agent, { tools });

  // (e) a permission ask (bash asks in the config): an interrupt, answered
  // through resume. Meanwhile, another client's new message is refused.
  agent.addMessage(user(`call:bash {"command":"echo perm-$((6*7))","description":"Say the answer"} then: allowed-${TAG}`));
  const ask = await run("permission", agent);
  report.runs.permission = ask;
  const other = newAgent(threadId, { messages: structuredClone(agent.messages) });
  other.addMessage(user(`while the ask waits ${TAG}`));
  report.runs.whileInterrupted = await run("whileInterrupted", other);
  const interrupts = agent.pendingInterrupts ?? [];
  report.runs.resume = await run("resume", agent, {
    resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { reply: "once" } })),
  });

  // (f) a steer: a slow turn runs; a second agent on the same thread posts
  // a run with forwardedProps.delivery "steer" while it streams.
  agent.addMessage(user(`reply slowly ${TAG}`));
  let streaming;
  const started = new Promise((resolve) => (streaming = resolve));
  const slow = run("slow", agent, {}, { onEvent: (e) => e.type === "TEXT_MESSAGE_CONTENT" && streaming() });
  await within("the slow run's first text", started, TIMEOUT).catch((e) => (report.steerWaitError = String(e)));
  const steerer = newAgent(threadId, { messages: structuredClone(agent.messages) });
  const steerMsg = user(`steer-${TAG}`);
  steerer.addMessage(steerMsg);
  report.steerText = steerMsg.content;
  const [slowRun, steerRun] = await Promise.all([slow, run("steer", steerer, { forwardedProps: { delivery: "steer" } })]);
  report.runs.slow = slowRun;
  report.runs.steer = steerRun;

  // (h) AG-UI's protobuf encoding, on the path form of the endpoint; then
  // the same turn replayed as SSE (the repeat of that run), to compare.
  const protoAgent = newAgent(threadId, { messages: structuredClone(agent.messages), path: true, Agent: ProtoAgent });
  protoAgent.addMessage(user(`proto agui prompt ${TAG}`));
  report.runs.proto = await run("proto", protoAgent);
  const protoIn = report.runs.proto.request.body;
  const replay = newAgent(threadId, { messages: protoIn.messages });
  replay.state = structuredClone(protoIn.state);
  report.runs.protoReplay = await run("protoReplay", replay, { runId: protoIn.runId });

  report.final = (await conversation(threadId)).messages;
}

// agentRun is one run on the session AGUI_THREAD with the prompt
// AGUI_PROMPT, to the agent forwardedProps.agent names (AGUI_AGENT).
async function agentRun() {
  const threadId = env("AGUI_THREAD");
  report.threadId = threadId;
  const agent = newAgent(threadId);
  agent.addMessage(user(env("AGUI_PROMPT")));
  const to = { agent: env("AGUI_AGENT") };
  report.runs.agent = await run("agent", agent, { forwardedProps: to });

  // AGUI_SLOW (a slow prompt), AGUI_STREAMING (a word of its answer) and
  // AGUI_STEER: the slow prompt's run, and a second agent's run posting
  // the steer (forwardedProps.delivery "steer") once the answer streams.
  if (process.env.AGUI_SLOW) {
    agent.addMessage(user(env("AGUI_SLOW")));
    const word = env("AGUI_STREAMING");
    let streaming;
    const started = new Promise((resolve) => (streaming = resolve));
    const slow = run("slow", agent, { forwardedProps: to }, {
      onEvent: (e) => e.type === "TEXT_MESSAGE_CONTENT" && e.delta.includes(word) && streaming(),
    });
    await within("the slow run's answer streaming", started, TIMEOUT).catch((e) => (report.steerWaitError = String(e)));
    const steerer = newAgent(threadId, { messages: structuredClone(agent.messages) });
    const steerMsg = user(env("AGUI_STEER"));
    steerer.addMessage(steerMsg);
    report.steerText = steerMsg.content;
    const [slowRun, steerRun] = await Promise.all([slow, run("steer", steerer, { forwardedProps: { ...to, delivery: "steer" } })]);
    report.runs.slow = slowRun;
    report.runs.steer = steerRun;
  }
  report.final = (await conversation(threadId)).messages;
}

try {
  await (process.env.AGUI_AGENT ? agentRun() : main());
} catch (e) {
  report.fatal = String(e?.stack || e);
}
report.warnings = warnings;
// Exit once the report is written: a pipe takes a large write
// asynchronously, and process.exit would cut it short.
process.stdout.write(JSON.stringify({ report }) + "\n", () => process.exit(0));
