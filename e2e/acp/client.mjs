// Drives `opencode-server acp` over stdio with the official ACP client
// library, @agentclientprotocol/sdk (the version pinned in package.json),
// and prints one JSON object of what it saw on stdout; e2e/acp_test.go
// (TestACP) runs it and asserts on that object.
//
// Environment:
//   ACP_SERVER   the opencode-server binary
//   ACP_ARGS     a JSON array of its arguments (["acp", "--data", ...]); the
//                same arguments start both processes
//   ACP_CWD      the project directory (session cwd)
//   ACP_TRACE    optional: a file that receives every frame both ways and
//                the server's stderr, one JSON object a line
//
// Two processes on the same --data, one after the other: the first runs a
// session (prompt, steer mid-turn, steer when idle, cancel) and exits when
// its stdin closes; the second loads the session (session/load replays it).
// Protocol failures (an error reply, a timeout, a process that dies) make
// the script exit 1 with a message on stderr; what the replies and updates
// say is for the Go test to judge.

import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { ARGS, CWD, SERVER, TIMEOUT, TRACE, sdkVersion, within } from "./common.mjs";

const t0 = Date.now();
function trace(run, dir, msg) {
  if (TRACE) appendFileSync(TRACE, JSON.stringify({ ms: Date.now() - t0, run, dir, msg }) + "\n");
}

// What the SDK logs with console.error (a notification it could not parse
// or handle, an invalid message) is a failure of the agent's frames.
const sdkErrors = [];
const origError = console.error;
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  origError(...args);
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, ms = TIMEOUT) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(5);
  }
}

// start spawns one server process and connects the official client to it.
async function start(run) {
  const child = spawn(SERVER, ARGS, { cwd: CWD, stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let stderr = "";
  let port = 0;
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (s) => {
    stderr += s;
    for (const line of s.split("\n")) if (line) trace(run, "stderr", line);
    const m = /opencode server listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
    if (m) port = Number(m[1]);
  });
  child.on("error", (e) => {
    stderr += `spawn: ${e}\n`;
  });

  // The wire, as the SDK reads and writes it: every frame is traced and
  // kept in order (the order of updates and replies is checked on it).
  const wire = [];
  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const tap = (dir) =>
    new TransformStream({
      transform(msg, ctl) {
        wire.push({ dir, msg });
        trace(run, dir, msg);
        ctl.enqueue(msg);
      },
    });
  const inTap = tap("in");
  const outTap = tap("out");
  void outTap.readable.pipeTo(base.writable).catch(() => {});
  const stream = { readable: base.readable.pipeThrough(inTap), writable: outTap.writable };

  const updates = []; // session/update params, as the SDK handed them over
  const permissions = [];
  const app = acp
    .client({ name: "opencode-server-e2e-acp" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      // The scripted model calls no tools; should it ask anyway, refuse.
      permissions.push(params);
      const reject = params.options.find((o) => o.kind === "reject_once");
      return reject ? { outcome: { outcome: "selected", optionId: reject.optionId } } : { outcome: { outcome: "cancelled" } };
    });
  const conn = app.connect(stream);
  const agent = conn.agent;
  const request = (method, params) => within(method, agent.request(method, params));

  async function stop() {
    conn.close();
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const ex = await exited;
    clearTimeout(timer);
    return ex;
  }
  async function fail(e) {
    // Give a dying process a moment to finish its stderr.
    const ex = await Promise.race([exited, sleep(2000).then(() => null)]);
    child.kill("SIGKILL");
    throw new Error(`${run}: ${e && e.stack ? e.stack : e}\n--- server ${ex ? `exited ${JSON.stringify(ex)}` : "still running"}; its stderr (${run}) ---\n${stderr.slice(-4000)}`);
  }
  // A process that dies early fails the step that waits on it.
  const stopping = { value: false };
  void exited.then((ex) => {
    if (!stopping.value) conn.close(new Error(`${run}: server exited early: ${JSON.stringify(ex)}`));
  });
  return {
    child, agent, request, updates, permissions, wire, fail,
    port: () => port,
    stderr: () => stderr,
    async stop() {
      stopping.value = true;
      return stop();
    },
  };
}

// textsById joins the text of agent_message_chunk updates by messageId.
function textsById(us) {
  const out = {};
  for (const u of us) {
    if (u.update.sessionUpdate !== "agent_message_chunk") continue;
    const id = u.update.messageId ?? "";
    out[id] = (out[id] ?? "") + textOf(u);
  }
  return out;
}

const textOf = (u) => (u.update.content && u.update.content.type === "text" ? u.update.content.text : "");
const kindIs = (k) => (u) => u.update.sessionUpdate === k;

// http GETs path on the process's HTTP API and decodes the JSON answer.
async function http(port, path) {
  const res = await within(`GET ${path}`, fetch(`http://127.0.0.1:${port}${path}`));
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${body}`);
  return JSON.parse(body);
}

// replyIndex is where the reply to the first request named method sits on
// the wire; updatesBefore counts the session/update frames before it.
function replyIndex(wire, method, skip = 0) {
  const reqs = wire.filter((f) => f.dir === "out" && f.msg.method === method);
  const req = reqs[skip];
  if (!req) return -1;
  return wire.findIndex((f) => f.dir === "in" && f.msg.id === req.msg.id && !("method" in f.msg));
}

async function main() {
  const out = { sdkVersion, protocolVersion: acp.PROTOCOL_VERSION };
  const tag = Math.random().toString(36).slice(2, 10);

  // ---- first process ----
  const a = await start("run1");
  try {
    // 1. handshake
    const init = await a.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "opencode-server-e2e-acp", version: sdkVersion },
    });
    out.initialize = {
      protocolVersion: init.protocolVersion,
      loadSession: init.agentCapabilities?.loadSession ?? null,
      steeringSupported: init._meta?.steering?.supported ?? null,
      agentName: init.agentInfo?.name ?? null,
    };
    const created = await a.request(acp.methods.agent.session.new, { cwd: CWD, mcpServers: [] });
    const sessionId = created.sessionId;
    out.sessionId = sessionId;
    out.modes = created.modes ? created.modes.availableModes.map((m) => m.id) : null;
    const port = await until("the listening line on stderr", () => a.port());
    out.port = port;
    const mine = (u) => u.sessionId === sessionId;
    const settle = () => sleep(100); // let the SDK hand over the last updates

    // 2. a streamed prompt
    const promptText = `first prompt ${tag}`;
    let from = a.updates.length;
    const r1 = await a.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: promptText }] });
    await settle();
    let turn = a.updates.slice(from).filter(mine);
    out.prompt = {
      text: promptText,
      stopReason: r1.stopReason,
      messageId: r1._meta?.messageId ?? null,
      userEchoes: turn.filter(kindIs("user_message_chunk")).map((u) => ({ messageId: u.update.messageId ?? null, text: textOf(u) })),
      agentChunks: turn.filter(kindIs("agent_message_chunk")).length,
      agentMessageIds: [...new Set(turn.filter(kindIs("agent_message_chunk")).map((u) => u.update.messageId ?? null))],
      agentText: turn.filter(kindIs("agent_message_chunk")).map(textOf).join(""),
      // On the wire, every update of the turn came before its reply.
      updatesAfterReply: a.wire.slice(replyIndex(a.wire, "session/prompt", 0) + 1).filter((f) => f.msg.method === "session/update").length,
    };

    // 3. a steer while a turn runs
    const secondText = `second prompt ${tag}`;
    const steerText = `steer ${tag}`;
    from = a.updates.length;
    const p2 = a.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: secondText }] });
    p2.catch(() => {});
    await until("the second prompt's first agent_message_chunk", () => a.updates.slice(from).some((u) => mine(u) && kindIs("agent_message_chunk")(u)));
    const steer = await a.request("_session/steering", {
      sessionId,
      prompt: [{ type: "text", text: steerText }],
      _meta: { steering: { idleBehavior: "promptRequired" } },
    });
    const r2 = await p2;
    await settle();
    turn = a.updates.slice(from).filter(mine);
    const steerId = steer?._meta?.messageId ?? null;
    const echoIdx = turn.findIndex((u) => kindIs("user_message_chunk")(u) && u.update.messageId === steerId);
    out.steer = {
      promptText: secondText,
      text: steerText,
      outcome: steer?.outcome ?? null,
      messageId: steerId,
      promptMessageId: r2._meta?.messageId ?? null,
      promptStopReason: r2.stopReason,
      userEchoes: turn.filter(kindIs("user_message_chunk")).map((u) => ({ messageId: u.update.messageId ?? null, text: textOf(u) })),
      // the agent's text after the steer's echo (the turn went on with it)
      agentTextAfterEcho: echoIdx < 0 ? "" : turn.slice(echoIdx).filter(kindIs("agent_message_chunk")).map(textOf).join(""),
      agentMessageIds: [...new Set(turn.filter(kindIs("agent_message_chunk")).map((u) => u.update.messageId ?? null))],
      updatesAfterReply: a.wire.slice(replyIndex(a.wire, "session/prompt", 1) + 1).filter((f) => f.msg.method === "session/update").length,
    };
    const afterSteer = await http(port, `/api/session/${sessionId}/message?order=asc&limit=100`);
    out.steer.http = afterSteer.data.map((m) => ({ id: m.id, type: m.type, text: m.text ?? null }));

    // 4. a steer with no running turn
    const idleText = `idle steer ${tag}`;
    from = a.updates.length;
    const idle = await a.request("_session/steering", {
      sessionId,
      prompt: [{ type: "text", text: idleText }],
      _meta: { steering: { idleBehavior: "promptRequired" } },
    });
    await sleep(400); // anything it started would show by now
    const afterIdle = await http(port, `/api/session/${sessionId}/message?order=asc&limit=100`);
    out.idleSteer = {
      text: idleText,
      reply: idle,
      updatesAfter: a.updates.slice(from).filter(mine).length,
      messagesBefore: afterSteer.data.length,
      messagesAfter: afterIdle.data.length,
      textInHistory: afterIdle.data.some((m) => (m.text ?? "").includes(idleText)),
    };

    // 5. cancel a running turn
    const cancelText = `a long prompt to be cancelled ${tag} ` + "lorem ipsum dolor sit amet ".repeat(40);
    from = a.updates.length;
    const p3 = a.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: cancelText }] });
    p3.catch(() => {});
    await until("the cancelled prompt's first agent_message_chunk", () => a.updates.slice(from).some((u) => mine(u) && kindIs("agent_message_chunk")(u)));
    const cancelAt = Date.now();
    await within("session/cancel", a.agent.notify(acp.methods.agent.session.cancel, { sessionId }));
    const r3 = await p3;
    const cancelMs = Date.now() - cancelAt;
    await settle();
    turn = a.updates.slice(from).filter(mine);
    out.cancel = {
      text: cancelText,
      stopReason: r3.stopReason,
      messageId: r3._meta?.messageId ?? null,
      replyMs: cancelMs,
      agentChunks: turn.filter(kindIs("agent_message_chunk")).length,
      userEchoes: turn.filter(kindIs("user_message_chunk")).map((u) => ({ messageId: u.update.messageId ?? null })),
      updatesAfterReply: a.wire.slice(replyIndex(a.wire, "session/prompt", 2) + 1).filter((f) => f.msg.method === "session/update").length,
    };

    const final = await http(port, `/api/session/${sessionId}/message?order=asc&limit=100`);
    out.run1 = {
      http: final.data.map((m) => ({ id: m.id, type: m.type })),
      userMessageIds: a.updates.filter((u) => mine(u) && kindIs("user_message_chunk")(u)).map((u) => u.update.messageId ?? null),
      agentMessageIds: [...new Set(a.updates.filter((u) => mine(u) && kindIs("agent_message_chunk")(u)).map((u) => u.update.messageId ?? null))],
      agentTexts: textsById(a.updates.filter(mine)),
      updateKinds: [...new Set(a.updates.map((u) => u.update.sessionUpdate))],
      permissionAsks: a.permissions.length,
    };
  } catch (e) {
    await a.fail(e);
  }
  const ex1 = await a.stop();
  out.run1.exit = ex1;

  // ---- second process, same --data: session/load replays ----
  const b = await start("run2");
  try {
    const init = await b.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    if (!init.agentCapabilities?.loadSession) throw new Error("the second process does not offer session/load");
    const sessionId = out.sessionId;
    const mine = (u) => u.sessionId === sessionId;
    const loaded = await b.request(acp.methods.agent.session.load, { sessionId, cwd: CWD, mcpServers: [] });
    // Replayed updates came before the reply: count them on the wire.
    const at = replyIndex(b.wire, "session/load");
    const replayed = b.wire.slice(0, at).filter((f) => f.dir === "in" && f.msg.method === "session/update" && f.msg.params?.sessionId === sessionId);
    await sleep(200);
    out.load = {
      modes: loaded?.modes ? loaded.modes.availableModes.map((m) => m.id) : null,
      replayedBeforeReply: replayed.length,
      updatesAfterReply: b.updates.filter(mine).length - replayed.length,
      userMessageIds: replayed.filter((f) => f.msg.params.update.sessionUpdate === "user_message_chunk").map((f) => f.msg.params.update.messageId ?? null),
      userTexts: replayed.filter((f) => f.msg.params.update.sessionUpdate === "user_message_chunk").map((f) => f.msg.params.update.content?.text ?? ""),
      agentMessageIds: [...new Set(replayed.filter((f) => f.msg.params.update.sessionUpdate === "agent_message_chunk").map((f) => f.msg.params.update.messageId ?? null))],
      agentTexts: textsById(replayed.map((f) => f.msg.params)),
      // the SDK handed over the same updates
      sdkUserMessageIds: b.updates.filter((u) => mine(u) && kindIs("user_message_chunk")(u)).map((u) => u.update.messageId ?? null),
    };
  } catch (e) {
    await b.fail(e);
  }
  out.load.exit = await b.stop();
  out.sdkErrors = sdkErrors;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().then(
  () => process.exit(0),
  (e) => {
    origError(`acp client: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  },
);
