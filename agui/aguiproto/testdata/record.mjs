// Records what AG-UI's own 1.0.0 packages make of our test events, for the Go
// tests (which never need node). Run from a throwaway directory holding the
// packages:
//
//   mkdir -p /tmp/aguiproto-node && cd /tmp/aguiproto-node
//   npm install @ag-ui/encoder@1.0.0 @ag-ui/proto@1.0.0 @ag-ui/core@1.0.0 @ag-ui/client@1.0.0
//   cp $REPO/agui/aguiproto/testdata/record.mjs .
//
//   # 1. the frames @ag-ui/encoder's EventEncoder writes for events.json
//   node record.mjs encode $REPO/agui/aguiproto/testdata/events.json \
//     > $REPO/agui/aguiproto/testdata/encoder-1.0.0.golden
//   # 2. our frames (written by the Go test), decoded by @ag-ui/proto's decode
//   (cd $REPO && go test ./agui/aguiproto -run TestGolden -ours /tmp/ours.json)
//   node record.mjs decode /tmp/ours.json \
//     > $REPO/agui/aguiproto/testdata/decoded-by-proto-1.0.0.golden
//   # 3. a run made of our frames, read by @ag-ui/client's HttpAgent as a
//   #    protobuf response arriving 7 bytes at a time
//   node record.mjs client /tmp/ours.json \
//     > $REPO/agui/aguiproto/testdata/client-1.0.0.golden
//
// The outputs are one JSON object per line.
import { readFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";
import { EventEncoder } from "@ag-ui/encoder";
import * as proto from "@ag-ui/proto";

const [mode, file] = process.argv.slice(2);
const hex = (bytes) => Buffer.from(bytes).toString("hex");
const warnings = [];
console.warn = (...args) => warnings.push(args.join(" "));

if (mode === "encode") {
  const encoder = new EventEncoder({ accept: proto.AGUI_MEDIA_TYPE });
  if (encoder.getContentType() !== proto.AGUI_MEDIA_TYPE) throw new Error("encoder did not pick protobuf");
  for (const { name, event } of JSON.parse(readFileSync(file, "utf8"))) {
    warnings.length = 0;
    const frame = encoder.encodeBinary(event);
    console.log(JSON.stringify({ name, frame: hex(frame), ...(warnings.length ? { warnings: [...warnings] } : {}) }));
  }
} else if (mode === "decode") {
  for (const { name, frame } of JSON.parse(readFileSync(file, "utf8"))) {
    warnings.length = 0;
    const bytes = Buffer.from(frame, "hex");
    const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.length).getUint32(0, false);
    if (length !== bytes.length - 4) throw new Error(`${name}: length prefix ${length}, body ${bytes.length - 4}`);
    const decoded = proto.decode(new Uint8Array(bytes.subarray(4)));
    console.log(JSON.stringify({ name, frame, decoded, ...(warnings.length ? { warnings: [...warnings] } : {}) }));
  }
} else if (mode === "client") {
  const ours = Object.fromEntries(JSON.parse(readFileSync(file, "utf8")).map(({ name, frame }) => [name, Buffer.from(frame, "hex")]));
  const run = ["run_started", "messages_snapshot", "state_snapshot", "step_started", "text_message_start", "text_message_content",
    "text_message_end", "tool_call_start", "tool_call_args", "tool_call_end", "tool_call_result", "reasoning_start",
    "reasoning_message_start", "reasoning_message_content", "reasoning_message_end", "reasoning_end", "custom", "step_finished",
    "run_finished_interrupt"];
  const body = Buffer.concat(run.map((name) => ours[name]));
  globalThis.fetch = async () => new Response(new ReadableStream({
    start(c) { for (let i = 0; i < body.length; i += 7) c.enqueue(body.subarray(i, i + 7)); c.close(); },
  }), { status: 200, headers: { "content-type": proto.AGUI_MEDIA_TYPE } });
  const agent = new HttpAgent({ url: "http://127.0.0.1/agui", threadId: "ses_t" });
  const events = [];
  await agent.runAgent({ runId: "run_1" }, { onEvent: ({ event }) => { events.push(event.type); } });
  console.log(JSON.stringify({ run, events, messages: agent.messages, state: agent.state, pendingInterrupts: agent.pendingInterrupts,
    ...(warnings.length ? { warnings: [...warnings] } : {}) }));
} else {
  throw new Error("usage: node record.mjs encode|decode|client FILE");
}
