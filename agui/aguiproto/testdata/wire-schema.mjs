// Reads the wire schema off @ag-ui/proto 1.0.0's compiled dist/index.mjs (the
// ts-proto encode functions) and prints it as JSON: every message's fields with
// number, kind, repetition and presence, and every enum's values. Recorded once
// into wire-schema.json; TestSchemaMatches1_0_0 holds the .proto files to it.
//
//   cd /tmp/aguiproto-node && npm install @ag-ui/proto@1.0.0
//   node wire-schema.mjs /tmp/aguiproto-node/node_modules/@ag-ui/proto/dist/index.mjs > wire-schema.json
import { readFileSync } from "node:fs";

const src = readFileSync(process.argv[2], "utf8");
const google = new Set(["Struct", "Struct_FieldsEntry", "Value", "ListValue"]);
const messages = {};
const blockRe = /^const (\w+)\$?\d* = \{\n\tencode\(message, writer = new BinaryWriter\(\)\) \{\n([\s\S]*?)\n\t\treturn writer;/gm;
for (const [, name, body] of src.matchAll(blockRe)) {
  if (google.has(name)) continue;
  const fields = [];
  for (const line of body.split("\n")) {
    let m;
    if ((m = /^\t\tif \(message\.(\w+) !== (void 0|""|0)\) writer\.uint32\((\d+)\)\.(\w+)\(message\.\w+\);$/.exec(line))) {
      fields.push({ name: m[1], number: Number(m[3]) >> 3, kind: m[4], repeated: false, presence: m[2] === "void 0" ? "explicit" : "implicit" });
    } else if ((m = /^\t\tif \(message\.(\w+) !== void 0\) (\w+)\$?\d*\.encode\((?:\w+\.wrap\()?message\.\w+\)?, writer\.uint32\((\d+)\)\.fork\(\)\)\.join\(\);$/.exec(line))) {
      fields.push({ name: m[1], number: Number(m[3]) >> 3, kind: "message", type: m[2], repeated: false, presence: "explicit" });
    } else if ((m = /^\t\tfor \(const v of message\.(\w+)\) (\w+)\$?\d*\.encode\(v, writer\.uint32\((\d+)\)\.fork\(\)\)\.join\(\);$/.exec(line))) {
      fields.push({ name: m[1], number: Number(m[3]) >> 3, kind: "message", type: m[2], repeated: true, presence: "implicit" });
    } else if ((m = /^\t\tfor \(const v of message\.(\w+)\) writer\.uint32\((\d+)\)\.(\w+)\(v\);$/.exec(line))) {
      fields.push({ name: m[1], number: Number(m[2]) >> 3, kind: m[3], repeated: true, presence: "implicit" });
    } else {
      throw new Error(`${name}: unread encode line: ${line}`);
    }
  }
  messages[name] = fields;
}
const enums = {};
const enumRe = /^let (\w+?)(?:\$\d+)? = \/\* @__PURE__ \*\/ function\(\w+\) \{\n([\s\S]*?)\n\treturn \w+;/gm;
for (const [, name, body] of src.matchAll(enumRe)) {
  const values = {};
  for (const [, v, n] of body.matchAll(/\["(\w+)"\] = (-?\d+)\]/g)) if (v !== "UNRECOGNIZED") values[v] = Number(n);
  enums[name] = values;
}
console.log(JSON.stringify({ source: "@ag-ui/proto@1.0.0 dist/index.mjs", messages, enums }, null, 1));
