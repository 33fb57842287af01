// End-to-end test of opencode-server with the official @opencode-ai/sdk.
//
// Run by e2e/sdk_test.go (TestSDK), once per SDK version: the same source is
// type-checked and compiled against @opencode-ai/sdk@1.18.33
// (tsconfig.json) and against the latest release, installed as "sdk-latest"
// (tsconfig.latest.json, custom condition "sdk-latest"); at run time
// `node --conditions=sdk-latest` picks the latest one through the "#sdk"
// imports of package.json.
//
// Environment: BASE_URL (the server), PROJECT_DIR (its --directory),
// SDK_LABEL (a log prefix), SDK_VERSION (the SDK version that must be
// loaded). WARN lines (a read right after an event that saw the state
// before it, see settled() in check.ts) fail the run: the server publishes
// a finished message and the idle session only once they are stored.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CheckError, log, warnings } from "./check.js";
import type { Ctx } from "./ctx.js";
import { sessionEventResume } from "./resume.js";
import { v1Client, v1Directory } from "./v1.js";
import { v2Api, v2Legacy } from "./v2.js";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

/** The version of the SDK package "#sdk" resolves to. */
function sdkVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.resolve("#sdk")));
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@opencode-ai/sdk") return pkg.version ?? "?";
    } catch {
      // keep going up
    }
    dir = dirname(dir);
  }
  return "?";
}

async function main(): Promise<void> {
  const tag = Math.random().toString(36).slice(2, 10).toUpperCase();
  const project = env("PROJECT_DIR");
  const scratch = mkdtempSync(join(tmpdir(), "opencode-sdk-e2e-"));
  const other = join(scratch, `other project é+ü ${tag}`);
  mkdirSync(other);
  const file = `sdknotes-${tag}.txt`;
  const ctx: Ctx = {
    base: env("BASE_URL"),
    project,
    other,
    file,
    content: `notes of the server's project ${tag}\n`,
    otherContent: `notes of the other project ${tag}\n`,
    tag,
  };
  writeFileSync(join(project, file), ctx.content);
  writeFileSync(join(other, file), ctx.otherContent);
  const want = process.env.SDK_VERSION;
  const have = sdkVersion();
  log(`@opencode-ai/sdk ${have} against ${ctx.base}`);
  try {
    if (want && want !== "latest" && want !== have) throw new CheckError(`loaded @opencode-ai/sdk ${have}, want ${want}`);
    const sections: [string, (ctx: Ctx) => Promise<void>][] = [
      ["v1 client", v1Client],
      ["v1 client with directory", v1Directory],
      ["v2 client, v1 routes", v2Legacy],
      ["v2 client, /api routes", v2Api],
      ["v2 session event stream resumed after dropped connections", sessionEventResume],
    ];
    for (const [name, run] of sections) {
      log(`--- ${name}`);
      await run(ctx);
    }
    if (warnings.length > 0) throw new CheckError(`${warnings.length} stale read(s) right after an event:\n${warnings.join("\n")}`);
    log(`PASS (${warnings.length} warning${warnings.length === 1 ? "" : "s"})`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    rmSync(join(project, file), { force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`FAIL: ${err instanceof Error ? (err instanceof CheckError ? err.message : err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
