import { randomBytes } from "node:crypto";

/** What every section of the test gets. */
export interface Ctx {
  /** The server's URL (BASE_URL). */
  base: string;
  /** The server's --directory (PROJECT_DIR). */
  project: string;
  /** A second project directory with a space, non-ASCII letters and '+' in its name. */
  other: string;
  /** A file name present in project (and other) with known content. */
  file: string;
  /** Its content in project; in other it is otherContent. */
  content: string;
  otherContent: string;
  /** A random tag for prompts. */
  tag: string;
}

let last = 0;
let counter = 0;
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/**
 * msgID mints a message ID the way OpenCode's clients do (ascending: 12 hex
 * digits of ms·4096+counter, then 14 random base62 characters).
 */
export function msgID(): string {
  const now = Date.now();
  if (now !== last) {
    last = now;
    counter = 0;
  }
  counter++;
  const v = (BigInt(now) * 0x1000n + BigInt(counter)) & 0xffffffffffffn;
  let rnd = "";
  for (const b of randomBytes(14)) rnd += base62[b % 62];
  return "msg_" + v.toString(16).padStart(12, "0") + rnd;
}
