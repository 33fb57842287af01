// Drives `opencode-server acp` over stdio in ACP v2 with the official
// client library's v2 entry point (@agentclientprotocol/sdk/experimental/v2,
// the version pinned in package.json) and prints one JSON object of what it
// saw; e2e/acp_test.go (TestACPV2) runs it and asserts on that object.
//
// Environment: ACP_SERVER, ACP_ARGS, ACP_CWD, ACP_TRACE as for client.mjs
// (read by common.mjs).
//
// One process: initialize with protocolVersion 2, session/new through the
// SDK's session builder, a prompt read until idle by the SDK
// (readTextUntilIdle), and session/list. A protocol failure (an error reply,
// a timeout, a frame the SDK refuses) exits 1 with a message on stderr.

import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { ARGS, CWD, SERVER, TRACE, sdkVersion, within } from "./common.mjs";

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
child.stderr.setEncoding("utf8");
child.stderr.on("data", (s) => {
  stderr += s;
  for (const line of s.split("\n")) if (line) trace("stderr", line);
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

const conn = acp.client({ name: "opencode-server-e2e-acp-v2" }).connect(stream);
const agent = conn.agent;
const report = { sdkVersion };
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
  const session = await within("session/new", agent.buildSession(CWD).start());
  report.sessionId = session.sessionId ?? session.newSessionResponse?.sessionId;
  const text = "hello from the v2 sdk";
  const reply = await within("session/prompt", session.prompt(text));
  const agentText = await within("the reply until idle", session.readTextUntilIdle());
  report.prompt = { text, reply, agentText };
  const list = await within("session/list", agent.request("session/list", { cwd: CWD }));
  report.list = list.sessions.map((s) => s.sessionId);
  session.dispose();
} catch (e) {
  const ex = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 2000))]);
  child.kill("SIGKILL");
  origError(`${e && e.stack ? e.stack : e}\n--- server ${ex ? `exited ${JSON.stringify(ex)}` : "still running"} ---\n${stderr.slice(-4000)}`);
  process.exit(1);
}
conn.close();
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
report.exit = await exited;
clearTimeout(timer);
report.sdkErrors = sdkErrors;
process.stdout.write(JSON.stringify(report) + "\n");
