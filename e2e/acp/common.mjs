// What both client scripts (client.mjs, client_v2.mjs) share: their
// environment, the pinned SDK's version, and a bounded wait.

import { readFileSync } from "node:fs";

export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
export const SERVER = env("ACP_SERVER");
export const ARGS = JSON.parse(env("ACP_ARGS"));
export const CWD = env("ACP_CWD");
export const TRACE = process.env.ACP_TRACE || "";
// One request or one wait (ACP_TIMEOUT_MS: longer, for a slow agent).
export const TIMEOUT = Number(process.env.ACP_TIMEOUT_MS) || 20_000;

export const sdkVersion = JSON.parse(
  readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

// within is p, or a rejection after ms.
export function within(what, p, ms = TIMEOUT) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
