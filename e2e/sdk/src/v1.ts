// The v1 client: createOpencodeClient from "@opencode-ai/sdk" (the package's
// main export), with its own v1 typings (options as {path, query, body}).

import {
  createOpencodeClient,
  type AssistantMessage,
  type Command,
  type Config,
  type Event,
  type FileContent,
  type GlobalEvent,
  type Message,
  type OpencodeClient,
  type Part,
  type Session,
  type TextPart,
  type UserMessage,
} from "#sdk";
import type { SessionShellResponses as V2ShellResponses } from "#sdk/v2";
import { assert, expectShape, log, must, settled, type Spec } from "./check.js";
import { msgID, type Ctx } from "./ctx.js";
import { Tap } from "./stream.js";

type Common<T> = Pick<T, keyof T>;

const sessionSpec: Spec<Session> = {
  id: "string",
  projectID: "string",
  directory: "string",
  title: "string",
  version: "string",
  time: { created: "number", updated: "number" },
  revert: { $opt: { messageID: "string" } },
};

const assistantSpec: Spec<AssistantMessage> = {
  id: "string",
  sessionID: "string",
  role: { $eq: "assistant" },
  time: { created: "number", completed: "number" },
  parentID: "string",
  modelID: "string",
  providerID: "string",
  mode: "string",
  path: { cwd: "string", root: "string" },
  cost: "number",
  tokens: { input: "number", output: "number", reasoning: "number", cache: { read: "number", write: "number" } },
  error: { $opt: { name: "string", data: "object" } },
};

const userSpec: Spec<UserMessage> = {
  id: "string",
  sessionID: "string",
  role: { $eq: "user" },
  time: { created: "number" },
  agent: "string",
  model: { providerID: "string", modelID: "string" },
};

const partSpec: Spec<Common<Part>> = { id: "string", sessionID: "string", messageID: "string", type: "string" };
const textPartSpec: Spec<TextPart> = { id: "string", sessionID: "string", messageID: "string", type: { $eq: "text" }, text: "string" };

function checkParts(label: string, parts: Part[], messageID: string, sessionID: string): void {
  for (const p of parts) {
    expectShape<Common<Part>>(`${label} part ${p.id}`, p, partSpec);
    if (p.type === "text") expectShape(`${label} text part`, p, textPartSpec);
    assert(p.messageID === messageID && p.sessionID === sessionID, `${label}: part ${p.id} belongs to ${p.sessionID}/${p.messageID}, want ${sessionID}/${messageID}`, p);
  }
}

function text(parts: Part[]): string {
  return parts
    .filter((p): p is TextPart => p.type === "text")
    .map((p) => p.text)
    .join("");
}

function checkMessage(label: string, m: Message): void {
  if (m.role === "assistant") expectShape(label, m, assistantSpec);
  else expectShape(label, m, userSpec);
}

/** sessionOf returns the session an event is about, if it names one. */
function sessionOf(e: Event): string | undefined {
  const p = e.properties as { sessionID?: unknown; info?: { sessionID?: unknown; id?: unknown }; part?: { sessionID?: unknown } };
  const s = p.sessionID ?? p.part?.sessionID ?? p.info?.sessionID;
  return typeof s === "string" ? s : undefined;
}

function tapEvents(c: OpencodeClient, label: string): Promise<Tap<Event>> {
  const ac = new AbortController();
  return c.event.subscribe({ signal: ac.signal }).then((sub) => new Tap<Event>(label, sub.stream, ac));
}

export async function v1Client(ctx: Ctx): Promise<void> {
  const c = createOpencodeClient({ baseUrl: ctx.base });

  const cfg: Config = await must("v1 config.get", c.config.get());
  expectShape("v1 config.get", cfg, {});

  const title = `sdk v1 ${ctx.tag}`;
  const s: Session = await must("v1 session.create", c.session.create({ body: { title } }));
  expectShape("v1 session.create", s, sessionSpec);
  assert(s.title === title && s.directory === ctx.project, "v1 session.create: title/directory", s);

  const list: Session[] = await must("v1 session.list", c.session.list());
  list.forEach((x) => expectShape("v1 session.list item", x, sessionSpec));
  assert(list.some((x) => x.id === s.id), `v1 session.list: ${s.id} missing`, list);

  const got: Session = await must("v1 session.get", c.session.get({ path: { id: s.id } }));
  expectShape("v1 session.get", got, sessionSpec);
  assert(got.id === s.id, "v1 session.get: wrong session", got);

  // SSE: /event and /global/event, both open before the prompt.
  const ev = await tapEvents(c, "v1 event.subscribe");
  const gac = new AbortController();
  const gsub = await c.global.event({ signal: gac.signal });
  const gev = new Tap<GlobalEvent>("v1 global.event", gsub.stream, gac);
  try {
    const connected = await ev.waitFor("server.connected", (e) => e.type === "server.connected");
    expectShape("v1 event server.connected", connected, { type: { $eq: "server.connected" }, properties: "object" });
    await gev.waitFor("server.connected", (e) => e.payload.type === "server.connected");

    // Blocking prompt.
    const prompt = `hello from the v1 sdk ${ctx.tag}`;
    const r = await must(
      "v1 session.prompt",
      c.session.prompt({ path: { id: s.id }, body: { parts: [{ type: "text", text: prompt }] } }),
    );
    const answer: { info: AssistantMessage; parts: Part[] } = r;
    expectShape("v1 session.prompt", answer.info, assistantSpec);
    assert(answer.info.finish === "stop" && answer.info.error === undefined, "v1 session.prompt: want a finished turn", answer.info);
    checkParts("v1 session.prompt", answer.parts, answer.info.id, s.id);
    assert(text(answer.parts) === `You said: ${prompt}`, "v1 session.prompt: reply text", answer.parts);

    // Its events.
    const upd = await ev.waitFor(
      "message.updated (completed assistant)",
      (e) => e.type === "message.updated" && e.properties.info.id === answer.info.id && e.properties.info.role === "assistant" && e.properties.info.time.completed !== undefined,
    );
    if (upd.type === "message.updated") checkMessage("v1 event message.updated", upd.properties.info);
    const pu = await ev.waitFor(
      "message.part.updated (reply text)",
      (e) => e.type === "message.part.updated" && e.properties.part.messageID === answer.info.id && e.properties.part.type === "text",
    );
    if (pu.type === "message.part.updated") expectShape<Common<Part>>("v1 event message.part.updated", pu.properties.part, partSpec);
    const idle = await ev.waitFor("session.idle", (e) => e.type === "session.idle" && e.properties.sessionID === s.id);
    expectShape("v1 event session.idle", idle, { type: { $eq: "session.idle" }, properties: { sessionID: "string" } });
    for (const e of ev.events) expectShape("v1 event", e, { type: "string", properties: "object" });
    const g = await gev.waitFor(
      "global message.updated",
      (e) => e.payload.type === "message.updated" && e.payload.properties.info.id === answer.info.id,
    );
    expectShape("v1 global.event", g, { directory: "string", payload: { type: "string", properties: "object" } });
    assert(g.directory === ctx.project, "v1 global.event: directory", g);

    // Messages.
    const msgs: { info: Message; parts: Part[] }[] = await must("v1 session.messages", c.session.messages({ path: { id: s.id } }));
    msgs.forEach((m) => {
      checkMessage("v1 session.messages", m.info);
      checkParts("v1 session.messages", m.parts, m.info.id, s.id);
    });
    const user = msgs.find((m) => m.info.role === "user");
    assert(user !== undefined && user.info.id === answer.info.parentID, "v1 session.messages: the user message is the reply's parent", msgs);
    assert(text(user.parts) === prompt, "v1 session.messages: user text", user);

    // promptAsync with a client-chosen message ID: 204, then the turn runs.
    const mid = msgID();
    const p2 = `async v1 ${ctx.tag}`;
    await must("v1 session.promptAsync", c.session.promptAsync({ path: { id: s.id }, body: { messageID: mid, parts: [{ type: "text", text: p2 }] } }), 204);
    const reply2 = await ev.waitFor(
      "message.updated (async reply completed)",
      (e) => e.type === "message.updated" && e.properties.info.role === "assistant" && e.properties.info.parentID === mid && e.properties.info.time.completed !== undefined,
    );
    await ev.waitFor("session.idle after promptAsync", (e) => e.type === "session.idle" && e.properties.sessionID === s.id && ev.events.indexOf(e) > ev.events.indexOf(reply2));
    const messages = () => must("v1 session.messages", c.session.messages({ path: { id: s.id } }), undefined, true);
    const done = (ms: { info: Message; parts: Part[] }[], parent: string) =>
      ms.find((m) => m.info.role === "assistant" && m.info.parentID === parent && m.info.time.completed !== undefined);
    const msgs2 = await settled("v1 session.messages after session.idle", messages, (ms) => text(done(ms, mid)?.parts ?? []) === `You said: ${p2}`);
    const u2 = msgs2.find((m) => m.info.id === mid);
    assert(u2 !== undefined && u2.info.role === "user" && text(u2.parts) === p2, `v1 promptAsync: user message ${mid} kept its ID`, msgs2);
    const a2 = msgs2.find((m) => m.info.role === "assistant" && m.info.parentID === mid);
    assert(a2 !== undefined && text(a2.parts) === `You said: ${p2}`, "v1 promptAsync: reply", msgs2);

    // Abort a running turn.
    const p3 = `abort me ${ctx.tag}`;
    const mid3 = msgID();
    await must("v1 session.promptAsync (to abort)", c.session.promptAsync({ path: { id: s.id }, body: { messageID: mid3, parts: [{ type: "text", text: p3 }] } }), 204);
    const running = await ev.waitFor(
      "the reply to abort",
      (e) => e.type === "message.updated" && e.properties.info.role === "assistant" && e.properties.info.parentID === mid3,
    );
    const runningID = running.type === "message.updated" ? running.properties.info.id : "";
    await ev.waitFor(
      "the reply to abort streaming text",
      (e) => e.type === "message.part.updated" && e.properties.part.type === "text" && e.properties.part.messageID === runningID,
    );
    const aborted: boolean = await must("v1 session.abort", c.session.abort({ path: { id: s.id } }));
    assert(aborted === true, "v1 session.abort: want true", aborted);
    await ev.waitFor(
      "message.updated with MessageAbortedError",
      (e) => e.type === "message.updated" && e.properties.info.role === "assistant" && e.properties.info.parentID === mid3 && e.properties.info.error?.name === "MessageAbortedError",
    );
    const msgs3 = await settled("v1 session.messages after the abort", messages, (ms) => done(ms, mid3) !== undefined);
    const a3 = msgs3.find((m) => m.info.role === "assistant" && m.info.parentID === mid3);
    assert(a3 !== undefined && a3.info.role === "assistant" && a3.info.error?.name === "MessageAbortedError", "v1 abort: the reply ends with MessageAbortedError", a3);
    expectShape("v1 aborted message", a3.info, assistantSpec);

    // Revert to the first user message, then unrevert.
    const rv: Session = await must("v1 session.revert", c.session.revert({ path: { id: s.id }, body: { messageID: user.info.id } }));
    expectShape("v1 session.revert", rv, sessionSpec);
    assert(rv.revert?.messageID === user.info.id, "v1 session.revert: revert.messageID", rv);
    const un: Session = await must("v1 session.unrevert", c.session.unrevert({ path: { id: s.id } }));
    expectShape("v1 session.unrevert", un, sessionSpec);
    assert(un.revert === undefined, "v1 session.unrevert: revert cleared", un);

    // Shell. The v1 typings say the answer is an AssistantMessage; OpenCode
    // 1.18.33 (and the v2 typings) answer {info, parts}. See the report.
    const shTag = `sdk-shell-${ctx.tag}`;
    const sh = await must("v1 session.shell", c.session.shell({ path: { id: s.id }, body: { agent: "build", command: `echo ${shTag}` } }));
    const shell = sh as unknown as V2ShellResponses[200];
    expectShape("v1 session.shell (v2 shape)", shell, { info: "object", parts: "array" });
    expectShape("v1 session.shell info", shell.info as unknown as AssistantMessage, assistantSpec);
    const tool = JSON.stringify(shell.parts);
    assert(tool.includes(shTag + "\\n"), "v1 session.shell: output", shell);
  } finally {
    await ev.close();
    await gev.close();
  }

  const cmds: Command[] = await must("v1 command.list", c.command.list());
  cmds.forEach((x) => expectShape("v1 command.list item", x, { name: "string", template: "string" }));

  const found: string[] = await must("v1 find.files", c.find.files({ query: { query: ctx.file.slice(0, 6) } }));
  assert(found.includes(ctx.file), `v1 find.files: ${ctx.file} missing`, found);
  const fc: FileContent = await must("v1 file.read", c.file.read({ query: { path: ctx.file } }));
  expectShape("v1 file.read", fc, { type: { $eq: "text" }, content: "string" });
  assert(fc.content === ctx.content.trimEnd(), "v1 file.read: content (trailing newline trimmed, as OpenCode does)", fc);
}

/** The v1 client made with `directory`: every call addresses that project. */
export async function v1Directory(ctx: Ctx): Promise<void> {
  const c = createOpencodeClient({ baseUrl: ctx.base, directory: ctx.other });
  const plain = createOpencodeClient({ baseUrl: ctx.base });

  const s: Session = await must("v1(dir) session.create", c.session.create({ body: {} }));
  expectShape("v1(dir) session.create", s, sessionSpec);
  assert(s.directory === ctx.other, `v1(dir) session.create: directory ${JSON.stringify(s.directory)}, want ${JSON.stringify(ctx.other)}`, s);

  const list: Session[] = await must("v1(dir) session.list", c.session.list());
  assert(list.length > 0 && list.every((x) => x.directory === ctx.other) && list.some((x) => x.id === s.id), "v1(dir) session.list: only the directory's sessions", list);

  const dirEv = await tapEvents(c, "v1(dir) event.subscribe");
  const plainEv = await tapEvents(plain, "v1 event.subscribe (server directory)");
  try {
    await dirEv.waitFor("server.connected", (e) => e.type === "server.connected");
    await plainEv.waitFor("server.connected", (e) => e.type === "server.connected");
    const prompt = `directory prompt ${ctx.tag}`;
    const r = await must("v1(dir) session.prompt", c.session.prompt({ path: { id: s.id }, body: { parts: [{ type: "text", text: prompt }] } }));
    expectShape("v1(dir) session.prompt", r.info, assistantSpec);
    assert(r.info.path.cwd === ctx.other, "v1(dir) session.prompt: path.cwd is the directory", r.info);
    assert(text(r.parts) === `You said: ${prompt}`, "v1(dir) session.prompt: reply", r.parts);
    await dirEv.waitFor("session.idle", (e) => e.type === "session.idle" && e.properties.sessionID === s.id);
    const leaked = plainEv.events.filter((e) => sessionOf(e) === s.id);
    assert(leaked.length === 0, "v1 event.subscribe of the server's directory got events of another directory's session", leaked);
  } finally {
    await dirEv.close();
    await plainEv.close();
  }

  const found: string[] = await must("v1(dir) find.files", c.find.files({ query: { query: ctx.file.slice(0, 6) } }));
  assert(found.includes(ctx.file), `v1(dir) find.files: ${ctx.file} missing`, found);
  const fc: FileContent = await must("v1(dir) file.read", c.file.read({ query: { path: ctx.file } }));
  assert(fc.content === ctx.otherContent.trimEnd(), "v1(dir) file.read: the directory's file", fc);
  log(`v1 directory client: ${JSON.stringify(ctx.other)} addressed`);
}
