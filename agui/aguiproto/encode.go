package aguiproto

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// The JSON form maps onto the wire field by field: a field's JSON name is the
// event's key, as in @ag-ui/proto, whose encode spreads the JSON event into
// the generated message. The fields 1.0.0 reshapes the JSON for have an enc
// hook in the tables (schema.go); the hooks are below the generic mapping.

const maxSafeInteger = 1<<53 - 1

// MaxDepth bounds the nesting of a JSON value carried as google.protobuf.Value
// (state, metadata, custom values). @ag-ui/proto 1.0.0's decoder overflows its
// stack on a state nested some 1400 levels deep (node 20), so a deeper one is
// refused here rather than breaking the client's stream.
const MaxDepth = 512

type encFunc = func(b []byte, f *field, o map[string]any, path string) ([]byte, error)

// appendEvent writes the Event envelope: the one arm the type names.
func appendEvent(b []byte, o map[string]any) ([]byte, error) {
	typ, _ := o["type"].(string)
	a, ok := arms[typ]
	if !ok {
		if _, has := o["type"]; !has {
			return nil, invalid("type", "missing")
		}
		return nil, invalid("type", "unknown event type %v", o["type"])
	}
	return appendSub(b, a.num, a.msg, o, "")
}

// open starts a length-delimited field: its tag and a one-byte length,
// which closeAt widens when the body turns out longer (one under 128
// bytes, most of them, is never moved). It returns where the body starts.
func open(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

func closeAt(b []byte, at int) []byte {
	n := len(b) - at
	if n < 0x80 {
		b[at-1] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k-1:], b[at:at+n])
	protowire.AppendVarint(b[:at-1], uint64(n)) // in place: k bytes before the moved body
	return b
}

// appendSub writes the object o as message m in field num.
func appendSub(b []byte, num protowire.Number, m *message, o map[string]any, path string) ([]byte, error) {
	b, at := open(b, num)
	b, err := appendMessage(b, m, o, path)
	if err != nil {
		return nil, err
	}
	return closeAt(b, at), nil
}

// appendMessage writes m's fields from the JSON object o, in field order.
func appendMessage(b []byte, m *message, o map[string]any, path string) ([]byte, error) {
	if m.check != nil {
		if err := m.check(o, path); err != nil {
			return nil, err
		}
	}
	var err error
	for i := range m.fields {
		f := &m.fields[i]
		if f.enc != nil {
			b, err = f.enc(b, f, o, path)
		} else if v, ok := o[f.name]; ok {
			b, err = appendField(b, f, v, join(path, f.name))
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// appendField writes one field from its JSON value. null is an absence for
// the fields AG-UI calls optional (omitOptionalNulls drops them before
// encoding), for lists, objects and messages; on a required scalar it is an
// error; on a required google.protobuf.Value (snapshot, custom value, raw
// event) it is JSON null.
func appendField(b []byte, f *field, v any, path string) ([]byte, error) {
	if f.list {
		if v == nil {
			return b, nil
		}
		items, ok := v.([]any)
		if !ok {
			return nil, invalid(path, "want an array")
		}
		var err error
		for i, item := range items {
			ip := index(path, i)
			if f.kind == kMessage {
				obj, ok := item.(map[string]any)
				if !ok {
					return nil, invalid(ip, "want an object")
				}
				b, err = appendSub(b, f.num, f.msg, obj, ip)
			} else {
				b, err = appendScalar(b, f, item, ip, true)
			}
			if err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	switch f.kind {
	case kValue:
		if v == nil && f.opt {
			return b, nil
		}
		return appendValueField(b, f.num, v, path)
	case kStruct:
		if v == nil {
			return b, nil
		}
		return appendStructField(b, f.num, v, path)
	case kMessage:
		if v == nil {
			return b, nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, invalid(path, "want an object")
		}
		return appendSub(b, f.num, f.msg, obj, path)
	}
	if v == nil {
		if f.opt {
			return b, nil
		}
		return nil, invalid(path, "null for a required field")
	}
	return appendScalar(b, f, v, path, f.opt)
}

// appendScalar writes a string, bool or int64; a zero one only when always
// (an optional field that is set, a list element): proto3 writes no
// implicit-presence default.
func appendScalar(b []byte, f *field, v any, path string, always bool) ([]byte, error) {
	switch f.kind {
	case kString:
		s, ok := v.(string)
		if !ok {
			return nil, invalid(path, "want a string")
		}
		if s == "" && !always {
			return b, nil
		}
		b = protowire.AppendTag(b, f.num, protowire.BytesType)
		return protowire.AppendString(b, s), nil
	case kBool:
		x, ok := v.(bool)
		if !ok {
			return nil, invalid(path, "want a boolean")
		}
		if !x && !always {
			return b, nil
		}
		b = protowire.AppendTag(b, f.num, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(x)), nil
	case kInt64:
		n, err := safeInt(v, path)
		if err != nil {
			return nil, err
		}
		if n == 0 && !always {
			return b, nil
		}
		b = protowire.AppendTag(b, f.num, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(n)), nil
	}
	return nil, invalid(path, "no JSON mapping for this field")
}

func appendEnum(b []byte, num protowire.Number, n uint64) []byte {
	if n == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, n)
}

// safeInt reads an integer within JavaScript's safe range, the range AG-UI
// allows timestamps and token counts (1e3 and 5.0 are integers there too).
func safeInt(v any, path string) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, invalid(path, "want an integer")
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i > maxSafeInteger || i < -maxSafeInteger {
			return 0, invalid(path, "integer beyond ±(2^53-1)")
		}
		return i, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return 0, invalid(path, "want an integer within ±(2^53-1)")
	}
	return int64(f), nil
}

// google.protobuf.Value's oneof, Struct's map and ListValue's list.
const (
	valueNull   protowire.Number = 1 // NullValue, an enum: 0
	valueNumber protowire.Number = 2 // double
	valueString protowire.Number = 3
	valueBool   protowire.Number = 4
	valueStruct protowire.Number = 5
	valueList   protowire.Number = 6
	structField protowire.Number = 1 // map<string, Value>: entries of key 1, value 2
	listValues  protowire.Number = 1 // repeated Value
)

func appendValueField(b []byte, num protowire.Number, v any, path string) ([]byte, error) {
	b, at := open(b, num)
	b, err := appendValue(b, v, path, 0)
	if err != nil {
		return nil, err
	}
	return closeAt(b, at), nil
}

func appendStructField(b []byte, num protowire.Number, v any, path string) ([]byte, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(path, "want an object")
	}
	b, at := open(b, num)
	b, err := appendStruct(b, obj, path, 0)
	if err != nil {
		return nil, err
	}
	return closeAt(b, at), nil
}

// appendValue writes a Value's body (Value.wrap): any JSON value, numbers as
// doubles.
func appendValue(b []byte, v any, path string, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return nil, invalid(path, "nested deeper than %d", MaxDepth)
	}
	switch x := v.(type) {
	case nil:
		b = protowire.AppendTag(b, valueNull, protowire.VarintType)
		return protowire.AppendVarint(b, 0), nil
	case bool:
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(x)), nil
	case string:
		b = protowire.AppendTag(b, valueString, protowire.BytesType)
		return protowire.AppendString(b, x), nil
	case json.Number:
		// Beyond float64's range JSON.parse reads ±Infinity, which the SSE
		// twin of the event (JSON.stringify) would send as null: refused.
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, invalid(path, "number %q out of a double's range", string(x))
		}
		b = protowire.AppendTag(b, valueNumber, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(f)), nil
	case []any:
		b, list := open(b, valueList)
		for i, item := range x {
			var (
				at  int
				err error
			)
			b, at = open(b, listValues)
			if b, err = appendValue(b, item, index(path, i), depth+1); err != nil {
				return nil, err
			}
			b = closeAt(b, at)
		}
		return closeAt(b, list), nil
	case map[string]any:
		b, at := open(b, valueStruct)
		b, err := appendStruct(b, x, path, depth)
		if err != nil {
			return nil, err
		}
		return closeAt(b, at), nil
	}
	return nil, invalid(path, "not a JSON value (%T)", v)
}

// appendStruct writes a Struct's body, its entries in key order.
func appendStruct(b []byte, obj map[string]any, path string, depth int) ([]byte, error) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		var (
			entry, val int
			err        error
		)
		b, entry = open(b, structField)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b, val = open(b, 2)
		if b, err = appendValue(b, obj[k], join(path, k), depth+1); err != nil {
			return nil, err
		}
		b = closeAt(closeAt(b, val), entry)
	}
	return b, nil
}

func optString(o map[string]any, key, path string) (*string, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, invalid(path, "want a string")
	}
	return &s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The hooks: fields 1.0.0 fills from a reshaped JSON.

// baseEventField writes an arm's base event from the event's own keys.
func baseEventField(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	return appendSub(b, f.num, f.msg, o, path)
}

// eventTypeField writes BaseEvent.type, the number of the JSON type
// (appendEvent has checked it).
func eventTypeField(b []byte, f *field, o map[string]any, _ string) ([]byte, error) {
	typ, _ := o["type"].(string)
	return appendEnum(b, f.num, eventTypes[typ]), nil
}

// patchOpField writes a patch op: the lowercase JSON name of the enum.
func patchOpField(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	name, _ := o["op"].(string)
	n, ok := patchOps[name]
	if !ok {
		return nil, invalid(join(path, "op"), "unknown patch operation %v", o["op"])
	}
	return appendEnum(b, f.num, n), nil
}

// valueOrNull writes a patch's value, where null is a value (one a patch may
// add), not an absence.
func valueOrNull(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	v, ok := o[f.name]
	if !ok {
		return b, nil
	}
	return appendValueField(b, f.num, v, join(path, f.name))
}

// requiredObject writes a Struct the JSON requires: null there is no absence
// but an error.
func requiredObject(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	v, ok := o[f.name]
	if !ok {
		return b, nil
	}
	return appendStructField(b, f.num, v, join(path, f.name))
}

func outcomeRecord(o map[string]any) (map[string]any, error) {
	v := o["outcome"]
	if v == nil {
		return nil, nil
	}
	rec, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("outcome", "want an object")
	}
	return rec, nil
}

// outcomeType writes the outcome's type as outcome, which is all 1.0.0 keeps
// of it but for the list outcomeList writes.
func outcomeType(b []byte, f *field, o map[string]any, _ string) ([]byte, error) {
	rec, err := outcomeRecord(o)
	if rec == nil || err != nil {
		return b, err
	}
	typ, _ := rec["type"].(string)
	return appendScalar(b, f, typ, "outcome.type", false)
}

// outcomeList writes the outcome's list key when the outcome is of type
// when: a success outcome's pendingToolCallIds, an interrupt outcome's
// interrupts, a suspended subagent's interruptIds.
func outcomeList(when, key string) encFunc {
	return func(b []byte, f *field, o map[string]any, _ string) ([]byte, error) {
		rec, _ := outcomeRecord(o) // outcomeType has refused a non-object
		if typ, _ := rec["type"].(string); typ != when {
			return b, nil
		}
		return appendField(b, f, rec[key], "outcome."+key)
	}
}

// A tool result's content is a string (content) or parts (contentParts).
func toolResultText(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	switch c := o["content"].(type) {
	case nil, []any:
		return b, nil
	case string:
		return appendScalar(b, f, c, join(path, "content"), true)
	}
	return nil, invalid(join(path, "content"), "want a string or an array of parts")
}

func toolResultParts(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	if c, ok := o["content"].([]any); ok {
		return appendField(b, f, c, join(path, "content"))
	}
	return b, nil
}

// Roles 1.0.0's decoder knows, and of them the ones whose content may be parts
// (it rejects parts on the others, so they are not encoded).
var (
	knownRoles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true, "tool": true, "activity": true, "reasoning": true}
	partsRoles = map[string]bool{"user": true, "tool": true}
)

// A message's content (toWireMessage) is parts when an array (user and tool
// messages, and roles 1.0.0 does not know), the activity message's object,
// else a string.
func messageText(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	cp := join(path, "content")
	role, _ := o["role"].(string)
	switch c := o["content"].(type) {
	case nil:
		return b, nil
	case []any:
		if knownRoles[role] && !partsRoles[role] {
			return nil, invalid(cp, "a %s message's content is no array of parts", role)
		}
		return b, nil
	case string:
		if role == "activity" {
			return b, nil // activityContent refuses it
		}
		return appendScalar(b, f, c, cp, true)
	}
	if role == "activity" {
		return b, nil
	}
	return nil, invalid(cp, "want a string")
}

func messageParts(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	if c, ok := o["content"].([]any); ok {
		return appendField(b, f, c, join(path, "content"))
	}
	return b, nil
}

// activityContent writes an activity message's content; none is an empty
// object.
func activityContent(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	role, _ := o["role"].(string)
	c := o["content"]
	if _, parts := c.([]any); parts || role != "activity" {
		return b, nil
	}
	if c == nil {
		b, at := open(b, f.num)
		return closeAt(b, at), nil
	}
	return appendStructField(b, f.num, c, join(path, "content"))
}

// knownType refuses a part or source whose JSON type no arm has.
func knownType(what string, types ...string) func(map[string]any, string) error {
	return func(o map[string]any, path string) error {
		if typ, _ := o["type"].(string); slices.Contains(types, typ) {
			return nil
		}
		return invalid(join(path, "type"), "unknown %s %v", what, o["type"])
	}
}

// arm writes the oneof arm of a part or source when the JSON type names it;
// the arm's fields are the object's own keys.
func arm(name string) encFunc {
	return func(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
		if typ, _ := o["type"].(string); typ != name {
			return b, nil
		}
		return appendSub(b, f.num, f.msg, o, path)
	}
}

// documentArm writes a document part, and the pre-1.0 binary part as the
// document 1.0.0 maps it to.
func documentArm(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	switch typ, _ := o["type"].(string); typ {
	case "document":
		return appendSub(b, f.num, f.msg, o, path)
	case "binary":
		doc, err := legacyBinary(o, path)
		if err != nil {
			return nil, err
		}
		return appendSub(b, f.num, f.msg, doc, path)
	}
	return b, nil
}

// legacyBinary is the document 1.0.0 makes of a binary part: its bytes'
// source, and metadata that keeps the binary part's filename and id.
func legacyBinary(rec map[string]any, path string) (map[string]any, error) {
	id, err := optString(rec, "id", join(path, "id"))
	if err != nil {
		return nil, err
	}
	// The part's own metadata is not carried, but is read (and refused when
	// it is no JSON value) as on every part.
	if v := rec["metadata"]; v != nil {
		if _, err := appendValue(nil, v, join(path, "metadata"), 0); err != nil {
			return nil, err
		}
	}
	mime, err := optString(rec, "mimeType", join(path, "mimeType"))
	if err != nil {
		return nil, err
	}
	data, err := optString(rec, "data", join(path, "data"))
	if err != nil {
		return nil, err
	}
	url, err := optString(rec, "url", join(path, "url"))
	if err != nil {
		return nil, err
	}
	var src map[string]any
	switch {
	case deref(data) != "":
		src = map[string]any{"type": "data", "value": *data, "mimeType": deref(mime)}
	case deref(url) != "":
		src = map[string]any{"type": "url", "value": *url}
	case deref(id) != "":
		src = map[string]any{"type": "url", "value": *id}
	default:
		return nil, invalid(path, "a binary part needs data, url or id")
	}
	if src["type"] == "url" && mime != nil {
		src["mimeType"] = *mime
	}
	meta := map[string]any{"legacyBinary": true}
	if f, ok := rec["filename"]; ok && f != nil {
		meta["filename"] = f
	}
	if id != nil {
		meta["id"] = *id
	}
	return map[string]any{"source": src, "metadata": meta}, nil
}

// nullIsEmpty writes a data source's mimeType, which 1.0.0 writes as
// mimeType ?? "": null is none, not an error.
func nullIsEmpty(b []byte, f *field, o map[string]any, path string) ([]byte, error) {
	v := o[f.name]
	if v == nil {
		return b, nil
	}
	return appendField(b, f, v, join(path, f.name))
}
