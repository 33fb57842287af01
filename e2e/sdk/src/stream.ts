// Helpers for the SDK's SSE streams: a background reader that records what
// arrives, and a TCP proxy whose connections can be cut to simulate a network
// drop (the SDK then reconnects with Last-Event-ID).

import * as net from "node:net";
import { CheckError, dump } from "./check.js";

/** Tap reads an SDK event stream in the background. */
export class Tap<T> {
  readonly events: T[] = [];
  private waiters: { pred: (e: T) => boolean; resolve: (e: T) => void }[] = [];
  private ended = false;
  private failure: unknown;
  readonly done: Promise<void>;

  constructor(
    readonly label: string,
    stream: AsyncGenerator<T, unknown, unknown>,
    private readonly abort: AbortController,
  ) {
    this.done = (async () => {
      try {
        for await (const e of stream) {
          this.events.push(e);
          this.waiters = this.waiters.filter((w) => {
            if (!w.pred(e)) return true;
            w.resolve(e);
            return false;
          });
        }
      } catch (err) {
        if (!abort.signal.aborted) this.failure = err;
      } finally {
        this.ended = true;
      }
    })();
  }

  /** waitFor resolves with the first event (already seen or coming) matching pred. */
  waitFor(what: string, pred: (e: T) => boolean, ms = 15000): Promise<T> {
    const seen = this.events.find(pred);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        const why = this.failure !== undefined ? ` (stream failed: ${String(this.failure)})` : this.ended ? " (stream ended)" : "";
        reject(new CheckError(`${this.label}: no ${what} within ${ms}ms${why}; got ${this.events.length} events:\n${dump(this.events.slice(-30))}`));
      }, ms);
      const done = (e: T) => {
        clearTimeout(timer);
        resolve(e);
      };
      this.waiters.push({ pred, resolve: done });
    });
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.done;
  }
}

/** Proxy forwards TCP connections to target; drop() cuts every open one. */
export class Proxy {
  private server = net.createServer();
  private conns = new Set<net.Socket>();
  /** The head (request line and headers) of every request seen, in order. */
  readonly requests: string[] = [];
  port = 0;

  constructor(target: URL) {
    this.server.on("connection", (client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      this.conns.add(client);
      this.conns.add(upstream);
      let head = "";
      client.on("data", (chunk: Buffer) => {
        if (!head.includes("\r\n\r\n")) {
          head += chunk.toString("latin1");
          if (head.includes("\r\n\r\n")) this.requests.push(head.slice(0, head.indexOf("\r\n\r\n")));
        }
      });
      client.pipe(upstream);
      upstream.pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
        this.conns.delete(client);
        this.conns.delete(upstream);
      };
      client.on("error", end);
      upstream.on("error", end);
      client.on("close", end);
      upstream.on("close", end);
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return `http://127.0.0.1:${this.port}`;
  }

  /** drop resets every open connection, as a network failure would. */
  drop(): number {
    const n = this.conns.size / 2;
    for (const c of this.conns) c.resetAndDestroy();
    this.conns.clear();
    return n;
  }

  async close(): Promise<void> {
    this.drop();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** header returns the value of header name in a raw request head, or undefined. */
export function header(head: string, name: string): string | undefined {
  for (const line of head.split("\r\n").slice(1)) {
    const i = line.indexOf(":");
    if (i > 0 && line.slice(0, i).trim().toLowerCase() === name.toLowerCase()) return line.slice(i + 1).trim();
  }
  return undefined;
}
