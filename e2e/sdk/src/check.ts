// Runtime checks tied to the SDK's typings.
//
// A Spec<T> is a small description of the JSON a value of the SDK type T must
// have. It is derived from T at compile time: every key T requires must be
// listed (so a new required field in an SDK release fails tsc until the spec
// says how to check it), and each listed key's checker must fit the key's
// type. At run time check() walks the actual JSON with it.
//
//   "string" | "number" | "boolean" | "array" | "object"  the JSON kind
//   "any"                      present (not undefined), any value
//   { $eq: v }                 exactly v
//   { $each: spec }            an array whose every item matches spec
//   { $opt: spec }             only for keys T marks optional: if present, matches
//   { key: spec, ... }         an object, recursively
//
// A key T marks optional but listed with a plain spec (no $opt) must be
// present: that is a promise of ours stricter than the SDK's type.

type Kind<V> = V extends string
  ? "string"
  : V extends number
    ? "number"
    : V extends boolean
      ? "boolean"
      : V extends readonly unknown[]
        ? "array"
        : V extends object
          ? "object"
          : never;

type Eq<V> = V extends string | number | boolean ? { $eq: V } : never;
type Each<V> = V extends readonly (infer E)[] ? { $each: Field<E> } : never;
type Nested<V> = V extends readonly unknown[] ? never : V extends object ? Spec<V> : never;
export type Field<V> = "any" | Kind<NonNullable<V>> | Eq<NonNullable<V>> | Each<NonNullable<V>> | Nested<NonNullable<V>>;

type ReqKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];
type OptKeys<T> = Exclude<keyof T, ReqKeys<T>>;

export type Spec<T> = T extends unknown
  ? { [K in ReqKeys<T>]: Field<T[K]> } & { [K in OptKeys<T>]?: Field<T[K]> | { $opt: Field<T[K]> } }
  : never;

type AnySpec = string | { $eq: unknown } | { $each: AnySpec } | { $opt: AnySpec } | { [key: string]: AnySpec };

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function walk(v: unknown, spec: AnySpec, path: string, errs: string[]): void {
  if (typeof spec === "string") {
    if (spec === "any") {
      if (v === undefined) errs.push(`${path}: missing`);
      return;
    }
    if (kindOf(v) !== spec) errs.push(`${path}: want ${spec}, got ${v === undefined ? "nothing" : JSON.stringify(v)}`);
    return;
  }
  if ("$eq" in spec) {
    if (v !== spec.$eq) errs.push(`${path}: want ${JSON.stringify(spec.$eq)}, got ${JSON.stringify(v)}`);
    return;
  }
  if ("$opt" in spec) {
    if (v !== undefined) walk(v, spec.$opt as AnySpec, path, errs);
    return;
  }
  if ("$each" in spec) {
    if (!Array.isArray(v)) {
      errs.push(`${path}: want an array, got ${JSON.stringify(v)}`);
      return;
    }
    v.forEach((item, i) => walk(item, spec.$each as AnySpec, `${path}[${i}]`, errs));
    return;
  }
  if (kindOf(v) !== "object") {
    errs.push(`${path}: want an object, got ${v === undefined ? "nothing" : JSON.stringify(v)}`);
    return;
  }
  const o = v as Record<string, unknown>;
  for (const [k, s] of Object.entries(spec)) {
    walk(o[k], s as AnySpec, `${path}.${k}`, errs);
  }
}

/** Problems of v against spec, one per line; empty when v matches. */
export function problems(v: unknown, spec: AnySpec, path = "$"): string[] {
  const errs: string[] = [];
  walk(v, spec, path, errs);
  return errs;
}

export class CheckError extends Error {}

/**
 * expectShape checks that value (typed by the SDK as T) has the JSON shape
 * spec describes; spec is type-checked against T.
 */
export function expectShape<T>(label: string, value: T, spec: Spec<T>): T {
  const errs = problems(value, spec as AnySpec);
  if (errs.length > 0) {
    throw new CheckError(`${label}: the answer does not match the SDK's type:\n  ${errs.join("\n  ")}\nanswer: ${dump(value)}`);
  }
  return value;
}

export function assert(cond: unknown, msg: string, ...ctx: unknown[]): asserts cond {
  if (!cond) {
    throw new CheckError(msg + ctx.map((c) => "\n" + dump(c)).join(""));
  }
}

export function dump(v: unknown): string {
  const s = JSON.stringify(v, null, 2) ?? String(v);
  return s.length > 30000 ? s.slice(0, 30000) + "\n…(truncated)" : s;
}

/** What every SDK call answers with ("fields" response style). */
type Fields<D> = { data?: D; error?: unknown; request?: Request; response?: Response };

/**
 * must awaits an SDK call and returns its data; an error answer (or a
 * status outside want) throws with the status and body.
 */
export async function must<D>(label: string, call: Promise<Fields<D>>, want?: number, quiet = false): Promise<Exclude<D, undefined>> {
  const r = await call;
  const status = r.response?.status ?? 0;
  const method = r.request?.method ?? "?";
  const url = r.request?.url ?? "?";
  if (r.error !== undefined || status < 200 || status > 299 || (want !== undefined && status !== want)) {
    throw new CheckError(
      `${label}: ${method} ${url} answered ${status}${want !== undefined ? ` (want ${want})` : ""}: ${dump(r.error ?? r.data)}`,
    );
  }
  if (!quiet) log(`ok ${label} (${method} ${new URL(url).pathname} → ${status})`);
  return r.data as Exclude<D, undefined>;
}

/**
 * fails awaits an SDK call that must fail with status want and returns the
 * SDK's typed error.
 */
export async function fails<E>(label: string, call: Promise<{ error?: E; response?: Response }>, want: number): Promise<E> {
  const r = await call;
  const status = r.response?.status ?? 0;
  if (status !== want || r.error === undefined) {
    throw new CheckError(`${label}: answered ${status}, want ${want}: ${dump(r.error)}`);
  }
  log(`ok ${label} (→ ${status})`);
  return r.error;
}

export function log(msg: string): void {
  process.stdout.write(`[${process.env.SDK_LABEL ?? "sdk"}] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** poll calls fn until it returns a value other than undefined. */
export async function poll<T>(label: string, ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new CheckError(`${label}: still not so after ${ms}ms`);
    await sleep(50);
  }
}

/** Server behaviour the test tolerates but reports (printed as WARN lines). */
export const warnings: string[] = [];

export function warn(msg: string): void {
  warnings.push(msg);
  log(`WARN ${msg}`);
}

/**
 * settled reads until ok holds. A read made right after an event may see
 * the state before the event: a finished message or turn announced before
 * it is stored. The first stale read is reported with warn (which fails
 * the run at its end), and the test goes on once the state has caught up.
 */
export async function settled<T>(label: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const start = Date.now();
  let v = await read();
  if (ok(v)) return v;
  const first = v;
  while (Date.now() - start < ms) {
    await sleep(10);
    v = await read();
    if (ok(v)) {
      warn(`${label}: the read right after the event was stale (consistent ${Date.now() - start}ms later); first read: ${JSON.stringify(first).slice(0, 600)}`);
      return v;
    }
  }
  throw new CheckError(`${label}: still not so ${ms}ms after the event:\n${dump(v)}`);
}
