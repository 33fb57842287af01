// Drives `opencode-server acp` over stdio in ACP v2 with the official
// client library's v2 entry point (@agentclientprotocol/sdk/experimental/v2,
// the version pinned in package.json); e2e/acp_v2_test.go (TestACPV2) runs
// it and asserts on what it prints.
//
// Environment: ACP_SERVER, ACP_ARGS, ACP_CWD, ACP_TRACE as for client.mjs
// (read by common.mjs); ACP_AGENT, ACP_PROMPT, ACP_STREAMING and
// ACP_INJECT for the external agent's run (below).
//
// One process: initialize with protocolVersion 2, session/new through the
// SDK's session builder, a prompt read until idle by the SDK
// (readTextUntilIdle), a session/inject (queue) read until idle the same
// way, both HTTP views of the session's messages (GET /session/{id}/message
// and /api/session/{id}/message on the process's own HTTP port), and
// session/list. Then it prints that report as one JSON line and keeps the
// agent running until its own stdin closes (the Go test attaches the TUI
// meanwhile), closes the agent's stdin and prints a second line: the
// agent's exit and what the SDK logged. A protocol failure (an error reply,
// a timeout, a frame the SDK refuses) exits 1 with a message on stderr.
//
// With ACP_AGENT (e2e/agents_doors_test.go), the session's mode is that
// external agent and the prompt and the inject are ACP_PROMPT and a steer
// (ACP_INJECT) sent once the prompt's answer streams, read until idle.
// With ACP_RESUME, that session (of an earlier process on the same data)
// is resumed (session/resume) and prompted once (ACP_PROMPT).

import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { ARGS, CWD, SERVER, TRACE, env, sdkVersion, within } from "./common.mjs";

// ACP_AGENT: drive an external agent's session instead (steerAgent);
// ACP_RESUME: resume that session and prompt it once (promptOnce).
const AGENT = process.env.ACP_AGENT || "";
const RESUME = process.env.ACP_RESUME || "";

const t0 = Date.now();
const trace = (dir, msg) => {
  if (TRACE) appendFileSync(TRACE, JSON.stringify({ ms: Date.now() - t0, run: "v2", dir, msg }) + "\n");
};
const sdkErrors = [];
const origError = console.error;
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  origError(...args);
};

const child = spawn(SERVER, ARGS, { cwd: CWD, stdio: ["pipe", "pipe", "pipe"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
let stderr = "";
let port = 0;
child.stderr.setEncoding("utf8");
child.stderr.on("data", (s) => {
  stderr += s;
  for (const line of s.split("\n")) if (line) trace("stderr", line);
  const m = /opencode server listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
  if (m) port = Number(m[1]);
});

const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const tap = (dir) =>
  new TransformStream({
    transform(msg, ctl) {
      trace(dir, msg);
      ctl.enqueue(msg);
    },
  });
const inTap = tap("in");
const outTap = tap("out");
void outTap.readable.pipeTo(base.writable).catch(() => {});
const stream = { readable: base.readable.pipeThrough(inTap), writable: outTap.writable };

// Every session/update as the SDK handed it over (the session helper's
// router passes each one on to this handler too).
const updates = [];
const conn = acp
  .client({ name: "opencode-server-e2e-acp-v2" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  })
  .connect(stream);
const agent = conn.agent;

const textOf = (blocks) =>
  (Array.isArray(blocks) ? blocks : [blocks]).filter((b) => b && b.type === "text").map((b) => b.text).join("");

// http GETs path on the agent's HTTP API (no password is set) and decodes
// the JSON answer.
async function http(path) {
  const res = await within(`GET ${path}`, fetch(`http://127.0.0.1:${port}${path}`));
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${body}`);
  return JSON.parse(body);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const report = { sdkVersion };

// A prompt read until idle, then a session/inject (queue) on the idle
// session, read until idle the same way.
async function promptThenQueue(session, sessionId) {
  const tag = Math.random().toString(36).slice(2, 10);
  const text = `hello from the v2 sdk ${tag}`;
  const reply = await within("session/prompt", session.prompt(text));
  const agentText = await within("the reply until idle", session.readTextUntilIdle());
  report.prompt = { text, reply, agentText };

  // session/inject is not in the SDK's v2 schema; its request() sends a
  // method it does not know as is and hands back the raw result.
  const injectText = `queued by session/inject ${tag}`;
  const injected = await within(
    "session/inject",
    agent.request("session/inject", { sessionId, mode: "queue", content: [{ type: "text", text: injectText }] }),
  );
  // On an idle session a queued inject starts work of its own.
  const injectAgentText = await within("the inject's reply until idle", session.readTextUntilIdle());
  report.inject = { text: injectText, reply: injected, agentText: injectAgentText };
}

// A prompt (ACP_PROMPT) read until idle.
async function promptOnce(session) {
  const text = env("ACP_PROMPT");
  const reply = await within("session/prompt", session.prompt(text));
  const agentText = await within("the reply until idle", session.readTextUntilIdle());
  report.prompt = { text, reply, agentText };
}

// The session's mode set to the external agent ACP_AGENT, a prompt
// (ACP_PROMPT) read until its answer streams, then a session/inject
// (steer, ACP_INJECT) into the running turn, read until idle. Each agent
// text is the text read after the input (up to the inject, until idle).
async function steerAgent(session, sessionId) {
  await within("session/set_config_option mode", session.setConfigOption({ configId: "mode", value: AGENT }));
  const text = env("ACP_PROMPT");
  const reply = await within("session/prompt", session.prompt(text));
  // The answer streams once its text has ACP_STREAMING (any text without).
  const streaming = process.env.ACP_STREAMING || "";
  let agentText = "";
  while (!agentText || !agentText.includes(streaming)) {
    const m = await within("the prompt's answer streaming", session.nextUpdate());
    if (m.kind === "stop") throw new Error("the session went idle before the agent said anything");
    if (m.update.sessionUpdate === "agent_message_chunk") agentText += textOf(m.update.content);
  }
  report.prompt = { text, reply, agentText };
  const injectText = env("ACP_INJECT");
  const injected = await within(
    "session/inject",
    agent.request("session/inject", { sessionId, mode: "steer", content: [{ type: "text", text: injectText }] }),
  );
  const injectAgentText = await within("the turn until idle", session.readTextUntilIdle());
  report.inject = { text: injectText, reply: injected, agentText: injectAgentText };
}
try {
  const init = await within(
    "initialize",
    agent.request("initialize", {
      protocolVersion: 2,
      info: { name: "opencode-server-e2e-acp-v2", version: "1" },
      capabilities: {},
    }),
  );
  report.initialize = { protocolVersion: init.protocolVersion, inject: init.capabilities?.session?.inject ?? null };
  let session, sessionId;
  if (RESUME) {
    // A session of an earlier process on the same data: resumed, its
    // updates routed to an active-session helper as for a new one.
    sessionId = RESUME;
    const res = await within("session/resume", agent.request("session/resume", { sessionId, cwd: CWD, mcpServers: [] }));
    session = agent.attachSession({ ...res, sessionId });
  } else {
    session = await within("session/new", agent.buildSession(CWD).start());
    sessionId = session.sessionId ?? session.newSessionResponse?.sessionId;
  }
  report.sessionId = sessionId;
  if (RESUME) await promptOnce(session);
  else if (AGENT) await steerAgent(session, sessionId);
  else await promptThenQueue(session, sessionId);

  const mine = updates.filter((u) => u.sessionId === sessionId);
  report.userMessages = mine
    .filter((u) => u.update.sessionUpdate === "user_message")
    .map((u) => ({ messageId: u.update.messageId ?? null, text: textOf(u.update.content) }));
  const agentMessages = [];
  for (const u of mine) {
    if (u.update.sessionUpdate !== "agent_message_chunk") continue;
    let m = agentMessages.find((a) => a.messageId === (u.update.messageId ?? null));
    if (!m) agentMessages.push((m = { messageId: u.update.messageId ?? null, text: "" }));
    m.text += textOf(u.update.content);
  }
  report.agentMessages = agentMessages;
  report.states = mine.filter((u) => u.update.sessionUpdate === "state_update").map((u) => u.update.state);

  if (!port) throw new Error("no listening line on the agent's stderr");
  report.port = port;
  const v1 = await http(`/session/${sessionId}/message`);
  report.httpV1 = v1.map((m) => ({ id: m.info.id, role: m.info.role, text: textOf(m.parts) }));
  const v2 = await http(`/api/session/${sessionId}/message?order=asc&limit=100`);
  report.httpV2 = v2.data.map((m) => ({ id: m.id, type: m.type, text: m.text ?? null }));

  const list = await within("session/list", agent.request("session/list", { cwd: CWD }));
  report.list = list.sessions.map((s) => s.sessionId);

  // The agent stays up (its HTTP API with it) until the Go test closes
  // our stdin.
  process.stdout.write(JSON.stringify(report) + "\n");
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on("end", resolve).on("close", resolve));
  session.dispose();
} catch (e) {
  const ex = await Promise.race([exited, sleep(2000).then(() => null)]);
  child.kill("SIGKILL");
  origError(`${e && e.stack ? e.stack : e}\n--- server ${ex ? `exited ${JSON.stringify(ex)}` : "still running"} ---\n${stderr.slice(-4000)}`);
  process.exit(1);
}
conn.close();
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
const exit = await exited;
clearTimeout(timer);
process.stdout.write(JSON.stringify({ exit, sdkErrors }) + "\n");
