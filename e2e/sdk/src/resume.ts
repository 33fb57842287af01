// The v2 session event stream (GET /api/session/{id}/event) through a proxy
// whose connections are cut twice: once while idle, once in the middle of a
// turn. The SDK reconnects by itself with its original URL (?after=) plus
// Last-Event-ID; what it yields must be exactly the durable log after the
// original cursor: no gap, no duplicate.

import { createOpencodeClient, type SessionDurableEvent, type SessionHistory, type V2SessionEventsResponses } from "#sdk/v2";
import { assert, CheckError, expectShape, log, must, poll } from "./check.js";
import type { Ctx } from "./ctx.js";
import { header, Proxy, Tap } from "./stream.js";
import { durableSpec } from "./v2.js";

type Common<T> = Pick<T, keyof T>;

export async function sessionEventResume(ctx: Ctx): Promise<void> {
  const c = createOpencodeClient({ baseUrl: ctx.base });
  const s = (await must("resume v2.session.create", c.v2.session.create({}))).data;
  await must("resume v2.session.prompt #1", c.v2.session.prompt({ sessionID: s.id, prompt: { text: `before the stream ${ctx.tag}` } }));
  await must("resume v2.session.wait", c.v2.session.wait({ sessionID: s.id }), 204);
  const h1: SessionHistory = await must("resume v2.session.history", c.v2.session.history({ sessionID: s.id }));
  const n1 = h1.data.length;
  assert(n1 >= 5, "resume: want a few durable events after one turn", h1);

  const proxy = new Proxy(new URL(ctx.base));
  const via = createOpencodeClient({ baseUrl: await proxy.listen() });
  const errors: unknown[] = [];
  const ac = new AbortController();
  const after = 2;
  const sub = await via.v2.session.events(
    { sessionID: s.id, after: String(after) },
    { signal: ac.signal, sseDefaultRetryDelay: 100, sseMaxRetryDelay: 1000, onSseError: (e) => errors.push(e) },
  );
  // The SDK types each item as {id, event, data: string} (the SSE framing);
  // what it yields is the parsed `data:` line, a SessionDurableEvent, as
  // OpenCode 1.18.33 sends it.
  const typed: AsyncGenerator<V2SessionEventsResponses[200]> = sub.stream;
  const tap = new Tap<SessionDurableEvent>("v2.session.events", typed as unknown as AsyncGenerator<SessionDurableEvent>, ac);
  const seqOf = (e: SessionDurableEvent) => e.durable?.seq ?? -1;
  try {
    // Replay from ?after=2 up to the end of the log, then cut (idle).
    await tap.waitFor(`replayed seq ${n1}`, (e) => seqOf(e) === n1);
    const cut1 = proxy.drop();
    assert(cut1 > 0, "resume: no connection to cut");
    log(`resume: cut ${cut1} connection(s) after seq ${n1}`);
    await poll("resume: the SDK reconnects after the first cut", 10000, async () => (proxy.requests.length >= 2 ? true : undefined));

    // A second turn; cut again once it is streaming.
    await must("resume v2.session.prompt #2", c.v2.session.prompt({ sessionID: s.id, prompt: { text: `during the stream ${ctx.tag}` } }));
    const mid = await tap.waitFor("the second turn's text.started", (e) => e.type === "session.next.text.started" && seqOf(e) > n1);
    const cut2 = proxy.drop();
    log(`resume: cut ${cut2} connection(s) mid-turn at seq ${seqOf(mid)}`);
    await must("resume v2.session.wait", c.v2.session.wait({ sessionID: s.id }), 204);

    const h: SessionHistory = await must("resume v2.session.history (all)", c.v2.session.history({ sessionID: s.id }));
    const last = h.data[h.data.length - 1];
    assert(last !== undefined && !h.hasMore, "resume: history", h);
    await tap.waitFor(`seq ${seqOf(last)} (end of the log)`, (e) => seqOf(e) === seqOf(last));
    await new Promise((r) => setTimeout(r, 200)); // anything extra would be a duplicate

    tap.events.forEach((e) => expectShape<Common<SessionDurableEvent>>("v2.session.events item", e, durableSpec));
    const got = tap.events.map(seqOf);
    const want = h.data.map(seqOf).filter((q) => q > after);
    if (got.join() !== want.join()) {
      const dup = got.filter((q, i) => got.indexOf(q) !== i);
      const gap = want.filter((q) => !got.includes(q));
      throw new CheckError(`resume: received seqs ${got.join(",")}\nwant ${want.join(",")}\nduplicates: ${dup.join(",") || "none"}; missing: ${gap.join(",") || "none"}`);
    }
    for (const e of tap.events) {
      const ref = h.data.find((x) => seqOf(x) === seqOf(e));
      assert(ref !== undefined && ref.id === e.id && ref.type === e.type && JSON.stringify(ref.data) === JSON.stringify(e.data), `resume: seq ${seqOf(e)} differs from the history`, { streamed: e, history: ref });
    }

    // How the SDK reconnected: same URL (with ?after=2), Last-Event-ID the
    // last seq it had.
    const reqs = proxy.requests;
    assert(reqs.length >= 3 && errors.length >= 2, `resume: want 3+ requests and 2+ SSE errors, got ${reqs.length} and ${errors.length}`, reqs, errors.map(String));
    const lines = reqs.map((r) => r.split("\r\n")[0] ?? "");
    assert(lines.every((l) => l === lines[0] && l.includes(`after=${after}`)), "resume: every reconnect uses the original URL", lines);
    assert(header(reqs[0]!, "last-event-id") === undefined, "resume: the first request has no Last-Event-ID", reqs[0]);
    assert(header(reqs[1]!, "last-event-id") === String(n1), `resume: the first reconnect sends Last-Event-ID ${n1}`, reqs[1]);
    const lastBeforeCut2 = Number(header(reqs[2]!, "last-event-id"));
    assert(lastBeforeCut2 >= seqOf(mid), `resume: the second reconnect sends Last-Event-ID >= ${seqOf(mid)}`, reqs[2]);
    log(`resume: ${got.length} events (seq ${want[0]}..${want[want.length - 1]}) over ${reqs.length} connections, Last-Event-ID ${reqs.slice(1).map((r) => header(r, "last-event-id")).join(", ")}; no gap, no duplicate`);
  } finally {
    await tap.close();
    await proxy.close();
  }
}
