// The v2 client: createOpencodeClient from "@opencode-ai/sdk/v2" (flat
// parameters), on the v1 routes it shares with v1 clients and on the v2
// /api routes (client.v2.*).

import {
  createOpencodeClient,
  type AssistantMessage,
  type Command,
  type Event,
  type FileContent,
  type GlobalEvent,
  type LocationInfo,
  type Message,
  type OpencodeClient,
  type Part,
  type Session,
  type SessionDurableEvent,
  type SessionHistory,
  type SessionInputAdmitted,
  type SessionMessage,
  type SessionMessageAssistant,
  type SessionMessagesResponse,
  type SessionMessageUser,
  type SessionV2Info,
  type TextPart,
  type UserMessage,
  type V2FsFindResponses,
} from "#sdk/v2";
import { assert, expectShape, log, must, poll, settled, type Spec } from "./check.js";
import { msgID, type Ctx } from "./ctx.js";
import { Tap } from "./stream.js";

type Common<T> = Pick<T, keyof T>;

const tokensSpec = { input: "number", output: "number", reasoning: "number", cache: { read: "number", write: "number" } } as const;

const sessionSpec: Spec<Session> = {
  id: "string",
  slug: "string",
  projectID: "string",
  directory: "string",
  title: "string",
  version: "string",
  time: { created: "number", updated: "number" },
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
  agent: "string",
  path: { cwd: "string", root: "string" },
  cost: "number",
  tokens: tokensSpec,
  finish: "string",
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

const infoSpec: Spec<SessionV2Info> = {
  id: "string",
  projectID: "string",
  cost: "number",
  tokens: tokensSpec,
  time: { created: "number", updated: "number" },
  title: "string",
  location: { directory: "string" },
};

const admittedSpec: Spec<SessionInputAdmitted> = {
  admittedSeq: "number",
  id: "string",
  sessionID: "string",
  prompt: { text: "string" },
  delivery: "string",
  timeCreated: "number",
};

const messageBaseSpec: Spec<Common<SessionMessage>> = { id: "string", type: "string", time: { created: "number" } };
const userMessageSpec: Spec<SessionMessageUser> = { id: "string", time: { created: "number" }, text: "string", type: { $eq: "user" } };
const assistantMessageSpec: Spec<SessionMessageAssistant> = {
  id: "string",
  time: { created: "number", completed: "number" },
  type: { $eq: "assistant" },
  agent: "string",
  model: { id: "string", providerID: "string" },
  content: "array",
  finish: "string",
};

export const durableSpec: Spec<Common<SessionDurableEvent>> = {
  id: "string",
  type: "string",
  durable: { aggregateID: "string", seq: "number", version: "number" },
  data: { sessionID: "string", timestamp: "number" },
};

const locationSpec: Spec<LocationInfo> = { directory: "string", project: { id: "string", directory: "string" } };

function text(parts: Part[]): string {
  return parts
    .filter((p): p is TextPart => p.type === "text")
    .map((p) => p.text)
    .join("");
}

function checkSessionMessage(label: string, m: SessionMessage): void {
  expectShape<Common<SessionMessage>>(label, m, messageBaseSpec);
  if (m.type === "user") expectShape(label, m, userMessageSpec);
  if (m.type === "assistant") {
    expectShape(label, m, assistantMessageSpec);
    for (const p of m.content) expectShape<Common<SessionMessageAssistant["content"][number]>>(`${label} content`, p, { type: "string", id: "string" });
  }
}

function checkMessage(label: string, m: { info: Message; parts: Part[] }): void {
  if (m.info.role === "assistant") expectShape(label, m.info, { ...assistantSpec, finish: { $opt: "string" } });
  else expectShape(label, m.info, userSpec);
  for (const p of m.parts) {
    expectShape<Common<Part>>(`${label} part`, p, partSpec);
    assert(p.messageID === m.info.id, `${label}: part ${p.id} of ${p.messageID} listed under ${m.info.id}`);
  }
}

/** The v2 client on the v1 routes. */
export async function v2Legacy(ctx: Ctx): Promise<void> {
  const c = createOpencodeClient({ baseUrl: ctx.base });

  const cfg = await must("v2 config.get", c.config.get());
  expectShape("v2 config.get", cfg, {});

  const s: Session = await must("v2 session.create", c.session.create({ title: `sdk v2 ${ctx.tag}` }));
  expectShape("v2 session.create", s, sessionSpec);
  const list: Session[] = await must("v2 session.list", c.session.list());
  list.forEach((x) => expectShape("v2 session.list item", x, sessionSpec));
  assert(list.some((x) => x.id === s.id), "v2 session.list: new session missing", list);
  expectShape("v2 session.get", await must("v2 session.get", c.session.get({ sessionID: s.id })), sessionSpec);

  const ac = new AbortController();
  const ev = new Tap<Event>("v2 event.subscribe", (await c.event.subscribe({}, { signal: ac.signal })).stream, ac);
  const gac = new AbortController();
  const gev = new Tap<GlobalEvent>("v2 global.event", (await c.global.event({ signal: gac.signal })).stream, gac);
  try {
    await ev.waitFor("server.connected", (e) => e.type === "server.connected");
    await gev.waitFor("server.connected", (e) => e.payload.type === "server.connected");

    const prompt = `hello from the v2 sdk ${ctx.tag}`;
    const mid = msgID();
    const r: { info: AssistantMessage; parts: Part[] } = await must(
      "v2 session.prompt",
      c.session.prompt({ sessionID: s.id, messageID: mid, parts: [{ type: "text", text: prompt }] }),
    );
    expectShape("v2 session.prompt", r.info, assistantSpec);
    assert(r.info.parentID === mid, "v2 session.prompt: parentID is the client's messageID", r.info);
    assert(text(r.parts) === `You said: ${prompt}`, "v2 session.prompt: reply", r.parts);

    const upd = await ev.waitFor(
      "message.updated",
      (e) => e.type === "message.updated" && e.properties.info.id === r.info.id && e.properties.info.role === "assistant" && e.properties.info.time.completed !== undefined,
    );
    expectShape("v2 event message.updated", upd, { id: "string", type: { $eq: "message.updated" }, properties: { sessionID: "string", info: "object" } });
    await ev.waitFor("session.idle", (e) => e.type === "session.idle" && e.properties.sessionID === s.id);
    const adm = await ev.waitFor("session.next.prompt.admitted", (e) => e.type === "session.next.prompt.admitted" && e.properties.messageID === mid);
    // The SDK types properties.timestamp as a number; OpenCode 1.18.33 sends
    // an ISO string on /event (testdata/reference), and so do we.
    expectShape("v2 event session.next.prompt.admitted", adm, {
      id: "string",
      type: { $eq: "session.next.prompt.admitted" },
      properties: { sessionID: "string", messageID: "string", prompt: { text: "string" }, delivery: "string", timestamp: "any" },
    });
    const g = await gev.waitFor("global message.updated", (e) => e.payload.type === "message.updated" && e.payload.properties.info.id === r.info.id);
    expectShape("v2 global.event", g, { directory: "string", payload: { id: "string", type: "string", properties: "object" } });
    assert(g.directory === ctx.project, "v2 global.event: directory", g);

    // promptAsync, then paging with limit/before.
    const mid2 = msgID();
    await must("v2 session.promptAsync", c.session.promptAsync({ sessionID: s.id, messageID: mid2, parts: [{ type: "text", text: `second ${ctx.tag}` }] }), 204);
    await ev.waitFor(
      "the async reply",
      (e) => e.type === "message.updated" && e.properties.info.role === "assistant" && e.properties.info.parentID === mid2 && e.properties.info.time.completed !== undefined,
    );
    await ev.waitFor("session.idle after promptAsync", (e) => e.type === "session.idle" && e.properties.sessionID === s.id && ev.events.indexOf(e) > ev.events.indexOf(upd));
    const all: { info: Message; parts: Part[] }[] = await settled(
      "v2 session.messages after session.idle",
      () => must("v2 session.messages", c.session.messages({ sessionID: s.id }), undefined, true),
      (ms) => ms.some((m) => m.info.role === "assistant" && m.info.parentID === mid2 && m.info.time.completed !== undefined && text(m.parts) !== ""),
    );
    all.forEach((m) => checkMessage("v2 session.messages", m));
    assert(all.length === 4 && all[0]?.info.id === mid && all[2]?.info.id === mid2, "v2 session.messages: user/assistant twice, in order", all);
    const last2 = await must("v2 session.messages limit", c.session.messages({ sessionID: s.id, limit: 2 }));
    assert(last2.map((m) => m.info.id).join() === all.slice(2).map((m) => m.info.id).join(), "v2 session.messages limit=2: the last two", last2);
    const before = await must("v2 session.messages before", c.session.messages({ sessionID: s.id, limit: 2, before: mid2 }));
    assert(before.map((m) => m.info.id).join() === all.slice(0, 2).map((m) => m.info.id).join(), "v2 session.messages before: the first two", before);
    const one = await must("v2 session.message", c.session.message({ sessionID: s.id, messageID: mid }));
    checkMessage("v2 session.message", one);

    // Revert / unrevert, abort (idle: nothing to abort), shell.
    const rv: Session = await must("v2 session.revert", c.session.revert({ sessionID: s.id, messageID: mid2 }));
    assert(rv.revert?.messageID === mid2, "v2 session.revert: revert.messageID", rv);
    const un: Session = await must("v2 session.unrevert", c.session.unrevert({ sessionID: s.id }));
    assert(un.revert === undefined, "v2 session.unrevert: revert cleared", un);
    const ab: boolean = await must("v2 session.abort (idle)", c.session.abort({ sessionID: s.id }));
    assert(typeof ab === "boolean", "v2 session.abort: boolean", ab);
    const shTag = `sdk-v2-shell-${ctx.tag}`;
    const sh: { info: Message; parts: Part[] } = await must("v2 session.shell", c.session.shell({ sessionID: s.id, agent: "build", command: `echo ${shTag}` }));
    expectShape("v2 session.shell", sh.info, { ...assistantSpec, finish: { $opt: "string" } });
    const tool = sh.parts.find((p) => p.type === "tool");
    assert(tool !== undefined && tool.type === "tool" && tool.state.status === "completed" && tool.state.output === `${shTag}\n`, "v2 session.shell: a completed bash tool part with the output", sh);
  } finally {
    await ev.close();
    await gev.close();
  }

  const cmds: Command[] = await must("v2 command.list", c.command.list());
  cmds.forEach((x) => expectShape("v2 command.list item", x, { name: "string", template: "string", hints: { $each: "string" } }));
  const found: string[] = await must("v2 find.files", c.find.files({ query: ctx.file.slice(0, 6) }));
  assert(found.includes(ctx.file), "v2 find.files", found);
  const fc: FileContent = await must("v2 file.read", c.file.read({ path: ctx.file }));
  assert(fc.type === "text" && fc.content === ctx.content.trimEnd(), "v2 file.read", fc);
}

/** The v2 client on /api. */
export async function v2Api(ctx: Ctx): Promise<void> {
  const c: OpencodeClient = createOpencodeClient({ baseUrl: ctx.base });

  const created = await must("v2 v2.session.create", c.v2.session.create({}));
  const info: SessionV2Info = created.data;
  expectShape("v2 v2.session.create", info, infoSpec);
  assert(info.location.directory === ctx.project, "v2 v2.session.create: location.directory", info);
  const got = await must("v2 v2.session.get", c.v2.session.get({ sessionID: info.id }));
  expectShape("v2 v2.session.get", got.data, infoSpec);

  // Five prompts, each waited for: ten messages to page through.
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = msgID();
    const adm = await must(`v2 v2.session.prompt #${i + 1}`, c.v2.session.prompt({ sessionID: info.id, id, prompt: { text: `v2 api ${i} ${ctx.tag}` } }));
    const admitted: SessionInputAdmitted = adm.data;
    expectShape("v2 v2.session.prompt", admitted, admittedSpec);
    assert(admitted.id === id && admitted.sessionID === info.id && admitted.delivery === "steer", "v2 v2.session.prompt: admission", admitted);
    await must("v2 v2.session.wait", c.v2.session.wait({ sessionID: info.id }), 204);
    ids.push(id);
  }

  const full: SessionMessagesResponse = await must("v2 v2.session.messages", c.v2.session.messages({ sessionID: info.id, limit: 50, order: "asc" }));
  expectShape("v2 v2.session.messages", full, { data: "array", cursor: "object" });
  full.data.forEach((m) => checkSessionMessage("v2 v2.session.messages", m));
  const users = full.data.filter((m): m is SessionMessageUser => m.type === "user");
  assert(users.map((m) => m.id).join() === ids.join(), "v2 v2.session.messages: the user messages keep their IDs, in order", full.data);
  const replies = full.data.filter((m): m is SessionMessageAssistant => m.type === "assistant");
  assert(
    replies.length === 5 && replies.every((m, i) => m.content.some((p) => p.type === "text" && p.text === `You said: v2 api ${i} ${ctx.tag}`)),
    "v2 v2.session.messages: five replies",
    replies,
  );

  // Cursor paging, both orders, forward to the end and back again.
  for (const order of ["asc", "desc"] as const) {
    const want = (order === "asc" ? full.data : [...full.data].reverse()).map((m) => m.id);
    const pages: SessionMessagesResponse[] = [];
    let cursor: string | undefined;
    do {
      const page: SessionMessagesResponse = await must(
        `v2 v2.session.messages ${order} page ${pages.length + 1}`,
        // The cursor carries the order; OpenCode refuses both together.
        c.v2.session.messages(cursor ? { sessionID: info.id, limit: 3, cursor } : { sessionID: info.id, limit: 3, order }),
      );
      expectShape("v2 v2.session.messages page", page, { data: "array", cursor: "object" });
      // The SDK types both cursors as optional strings; OpenCode 1.18.33
      // answers an empty page with {previous: null, next: null}, as we do.
      const cur: Record<string, unknown> = page.cursor;
      for (const k of ["previous", "next"]) {
        const v = cur[k];
        assert(typeof v === "string" || (v === null && page.data.length === 0), `v2 v2.session.messages: cursor.${k} must be a string (null only on an empty page)`, page);
      }
      pages.push(page);
      cursor = page.data.length > 0 ? page.cursor.next : undefined;
      assert(pages.length <= 10, "v2 v2.session.messages: paging does not end", pages);
    } while (cursor);
    const got = pages.flatMap((p) => p.data.map((m) => m.id));
    assert(got.join() === want.join(), `v2 v2.session.messages ${order}: pages by cursor.next give every message once, in order`, { got, want });
    const second = pages[1];
    assert(second !== undefined && second.cursor.previous !== undefined, `v2 v2.session.messages ${order}: page 2 has cursor.previous`, pages);
    const back: SessionMessagesResponse = await must(
      `v2 v2.session.messages ${order} previous`,
      c.v2.session.messages({ sessionID: info.id, limit: 3, cursor: second.cursor.previous }),
    );
    assert(back.data.map((m) => m.id).join() === pages[0]!.data.map((m) => m.id).join(), `v2 v2.session.messages ${order}: cursor.previous of page 2 is page 1`, { back, first: pages[0] });
  }

  const cx = await must("v2 v2.session.context", c.v2.session.context({ sessionID: info.id }));
  const context: SessionMessage[] = cx.data;
  context.forEach((m) => checkSessionMessage("v2 v2.session.context", m));
  assert(context.map((m) => m.id).join() === full.data.map((m) => m.id).join(), "v2 v2.session.context: every message (no compaction)", { context, full: full.data });

  const hist: SessionHistory = await must("v2 v2.session.history", c.v2.session.history({ sessionID: info.id, limit: 100 }));
  expectShape("v2 v2.session.history", hist, { data: "array", hasMore: "boolean" });
  hist.data.forEach((e) => expectShape<Common<SessionDurableEvent>>("v2 v2.session.history event", e, durableSpec));
  assert(hist.data.every((e, i) => e.durable?.seq === i + 1 && e.durable.aggregateID === info.id), "v2 v2.session.history: seq 1, 2, 3, … of this session", hist.data.map((e) => e.durable));

  const fsr = await must("v2 v2.fs.find", c.v2.fs.find({ query: ctx.file.slice(0, 6) }));
  const fs: V2FsFindResponses[200] = fsr;
  expectShape("v2 v2.fs.find", fs, { location: locationSpec, data: { $each: { path: "string", type: "string" } } });
  assert(fs.location.directory === ctx.project && fs.data.some((e) => e.path === ctx.file && e.type === "file"), "v2 v2.fs.find", fs);

  // The v2 client made with `directory`.
  const d = createOpencodeClient({ baseUrl: ctx.base, directory: ctx.other });
  const ds = await must("v2(dir) v2.session.create", d.v2.session.create({}));
  expectShape("v2(dir) v2.session.create", ds.data, infoSpec);
  assert(ds.data.location.directory === ctx.other, `v2(dir) v2.session.create: location.directory ${JSON.stringify(ds.data.location.directory)}, want ${JSON.stringify(ctx.other)}`, ds.data);
  const dfs = await must("v2(dir) v2.fs.find", d.v2.fs.find({ query: ctx.file.slice(0, 6) }));
  assert(dfs.location.directory === ctx.other && dfs.data.some((e) => e.path === ctx.file), "v2(dir) v2.fs.find: the directory's files", dfs);
  const dlist: Session[] = await must("v2(dir) session.list", d.session.list());
  assert(dlist.some((x) => x.id === ds.data.id) && dlist.every((x) => x.directory === ctx.other), "v2(dir) session.list: the directory's sessions", dlist);
  const dfc: FileContent = await must("v2(dir) file.read", d.file.read({ path: ctx.file }));
  assert(dfc.content === ctx.otherContent.trimEnd(), "v2(dir) file.read", dfc);
  const dp = await must("v2(dir) v2.session.prompt", d.v2.session.prompt({ sessionID: ds.data.id, prompt: { text: `dir ${ctx.tag}` } }));
  await must("v2(dir) v2.session.wait", d.v2.session.wait({ sessionID: ds.data.id }), 204);
  const dm: SessionMessagesResponse = await poll("v2(dir) reply", 5000, async () => {
    const r = await must("v2(dir) v2.session.messages", d.v2.session.messages({ sessionID: ds.data.id, order: "asc" }));
    return r.data.some((m) => m.type === "assistant") ? r : undefined;
  });
  assert(dm.data[0]?.id === dp.data.id, "v2(dir) v2.session.messages: the prompt first", dm);
  log(`v2 directory client: ${JSON.stringify(ctx.other)} addressed`);
}
