package aguipbjson

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/opencode-server/opencode-server/agui/aguiproto"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
)

// The JSON form maps onto the wire field by field: a proto field's JSON name
// (message_id → messageId) is the event's key, as in @ag-ui/proto, whose
// encode spreads the JSON event into the generated message. The fields below
// are the exceptions, where 1.0.0 reshapes the JSON first; fill leaves them to
// the code that does the reshaping.
var reshaped = map[protoreflect.FullName]bool{
	"ag_ui.RunFinishedEvent.outcome":               true, // {type, ...} -> type string
	"ag_ui.RunFinishedEvent.interrupts":            true, // from outcome.interrupts
	"ag_ui.RunFinishedEvent.pending_tool_call_ids": true, // from outcome.pendingToolCallIds
	"ag_ui.SubagentFinishedEvent.outcome":          true,
	"ag_ui.SubagentFinishedEvent.interrupt_ids":    true, // from outcome.interruptIds
	"ag_ui.ToolCallResultEvent.content":            true, // string, or parts -> content_parts
	"ag_ui.ToolCallResultEvent.content_parts":      true,
	"ag_ui.Message.content":                        true, // string, parts, or activity object
	"ag_ui.Message.content_parts":                  true,
	"ag_ui.Message.activity_content":               true,
	"ag_ui.JsonPatchOperation.op":                  true, // "add" -> ADD
	"ag_ui.JsonPatchOperation.value":               true, // null is a value here, not an absence
}

// JSON-required object fields: null there is no absence but an error.
var requiredObject = map[protoreflect.FullName]bool{
	"ag_ui.ActivitySnapshotEvent.content": true,
}

const maxSafeInteger = 1<<53 - 1

func fromJSON(o map[string]any) (*aguipb.Event, error) {
	typ, _ := o["type"].(string)
	num, ok := aguipb.EventType_value[typ]
	if !ok {
		if _, has := o["type"]; !has {
			return nil, invalid("type", "missing")
		}
		return nil, invalid("type", "unknown event type %v", o["type"])
	}
	ev := &aguipb.Event{}
	envelope := ev.ProtoReflect()
	// The envelope's arm is the type in snake case (TEXT_MESSAGE_START → text_message_start).
	armField := envelope.Descriptor().Fields().ByName(protoreflect.Name(strings.ToLower(typ)))
	if armField == nil {
		return nil, invalid("type", "no wire form for %s", typ)
	}
	arm := envelope.Mutable(armField).Message()

	base := &aguipb.BaseEvent{Type: aguipb.EventType(num)}
	var err error
	if base.Timestamp, err = optInt(o, "timestamp", "timestamp"); err != nil {
		return nil, err
	}
	if base.RawEvent, err = optValue(o, "rawEvent", "rawEvent"); err != nil {
		return nil, err
	}
	if base.Metadata, err = optStruct(o, "metadata", "metadata"); err != nil {
		return nil, err
	}
	arm.Set(arm.Descriptor().Fields().ByName("base_event"), protoreflect.ValueOfMessage(base.ProtoReflect()))

	if err := fill(arm, o, ""); err != nil {
		return nil, err
	}
	switch a := ev.Event.(type) {
	case *aguipb.Event_RunFinished:
		err = runFinishedOutcome(a.RunFinished, o)
	case *aguipb.Event_SubagentFinished:
		err = subagentFinishedOutcome(a.SubagentFinished, o)
	case *aguipb.Event_ToolCallResult:
		a.ToolCallResult.Content, a.ToolCallResult.ContentParts, err = toolResultContent(o)
	}
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// fill sets m's fields from the JSON object o, by JSON name.
func fill(m protoreflect.Message, o map[string]any, path string) error {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "base_event" || reshaped[fd.FullName()] {
			continue
		}
		v, ok := o[fd.JSONName()]
		if !ok {
			continue
		}
		if err := setField(m, fd, v, join(path, fd.JSONName())); err != nil {
			return err
		}
	}
	switch m.Descriptor().FullName() {
	case "ag_ui.Message":
		return messageContent(m.Interface().(*aguipb.Message), o, path)
	case "ag_ui.JsonPatchOperation":
		return patchOp(m.Interface().(*aguipb.JsonPatchOperation), o, path)
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// setField sets one field from its JSON value. null is an absence for the
// fields AG-UI calls optional (omitOptionalNulls drops them before encoding)
// and for lists; on a required scalar it is an error; on a required
// google.protobuf.Value (snapshot, custom value, raw event) it is JSON null.
func setField(m protoreflect.Message, fd protoreflect.FieldDescriptor, v any, path string) error {
	if fd.IsList() {
		if v == nil {
			return nil
		}
		items, ok := v.([]any)
		if !ok {
			return invalid(path, "want an array")
		}
		list := m.Mutable(fd).List()
		for i, item := range items {
			ip := index(path, i)
			if fd.Kind() == protoreflect.MessageKind {
				obj, ok := item.(map[string]any)
				if !ok {
					return invalid(ip, "want an object")
				}
				elem := list.NewElement()
				if err := fill(elem.Message(), obj, ip); err != nil {
					return err
				}
				list.Append(elem)
				continue
			}
			sv, err := scalar(fd, item, ip)
			if err != nil {
				return err
			}
			list.Append(sv)
		}
		return nil
	}
	if fd.Kind() == protoreflect.MessageKind {
		switch fd.Message().FullName() {
		case "google.protobuf.Value":
			if v == nil && fd.HasOptionalKeyword() {
				return nil
			}
			val, err := toValue(v, path)
			if err != nil {
				return err
			}
			m.Set(fd, protoreflect.ValueOfMessage(val.ProtoReflect()))
			return nil
		case "google.protobuf.Struct":
			if v == nil && !requiredObject[fd.FullName()] {
				return nil
			}
			s, err := toStruct(v, path)
			if err != nil {
				return err
			}
			m.Set(fd, protoreflect.ValueOfMessage(s.ProtoReflect()))
			return nil
		}
		if v == nil {
			return nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return invalid(path, "want an object")
		}
		return fill(m.Mutable(fd).Message(), obj, path)
	}
	if v == nil {
		if fd.HasPresence() {
			return nil
		}
		return invalid(path, "null for a required field")
	}
	sv, err := scalar(fd, v, path)
	if err != nil {
		return err
	}
	m.Set(fd, sv)
	return nil
}

func scalar(fd protoreflect.FieldDescriptor, v any, path string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		s, ok := v.(string)
		if !ok {
			return protoreflect.Value{}, invalid(path, "want a string")
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		if !ok {
			return protoreflect.Value{}, invalid(path, "want a boolean")
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int64Kind:
		n, err := safeInt(v, path)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfInt64(n), nil
	}
	return protoreflect.Value{}, invalid(path, "no JSON mapping for a %s field", fd.Kind())
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

func optInt(o map[string]any, key, path string) (*int64, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return nil, nil
	}
	n, err := safeInt(v, path)
	if err != nil {
		return nil, err
	}
	return &n, nil
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

func reqString(o map[string]any, key, path string) (string, error) {
	v, ok := o[key]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(path, "want a string")
	}
	return s, nil
}

func optValue(o map[string]any, key, path string) (*structpb.Value, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return nil, nil
	}
	return toValue(v, path)
}

func optStruct(o map[string]any, key, path string) (*structpb.Struct, error) {
	v, ok := o[key]
	if !ok || v == nil {
		return nil, nil
	}
	return toStruct(v, path)
}

// toValue is Value.wrap: any JSON value, numbers as doubles.
func toValue(v any, path string) (*structpb.Value, error) { return valueAt(v, path, 0) }

func valueAt(v any, path string, depth int) (*structpb.Value, error) {
	if depth > aguiproto.MaxDepth {
		return nil, invalid(path, "nested deeper than %d", aguiproto.MaxDepth)
	}
	switch x := v.(type) {
	case nil:
		return structpb.NewNullValue(), nil
	case bool:
		return structpb.NewBoolValue(x), nil
	case string:
		return structpb.NewStringValue(x), nil
	case json.Number:
		// Beyond float64's range JSON.parse reads ±Infinity, which the SSE
		// twin of the event (JSON.stringify) would send as null: refused.
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, invalid(path, "number %q out of a double's range", string(x))
		}
		return structpb.NewNumberValue(f), nil
	case []any:
		l := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, item := range x {
			iv, err := valueAt(item, index(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			l.Values[i] = iv
		}
		return structpb.NewListValue(l), nil
	case map[string]any:
		s, err := structAt(x, path, depth)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	}
	return nil, invalid(path, "not a JSON value (%T)", v)
}

func toStruct(v any, path string) (*structpb.Struct, error) { return structAt(v, path, 0) }

func structAt(v any, path string, depth int) (*structpb.Struct, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(path, "want an object")
	}
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(obj))}
	for k, item := range obj {
		iv, err := valueAt(item, join(path, k), depth+1)
		if err != nil {
			return nil, err
		}
		s.Fields[k] = iv
	}
	return s, nil
}

// runFinishedOutcome flattens outcome as 1.0.0 does: the type goes to
// outcome, a success outcome's pendingToolCallIds and an interrupt outcome's
// interrupts to their repeated fields; anything else in it has no wire form.
func runFinishedOutcome(ev *aguipb.RunFinishedEvent, o map[string]any) error {
	rec, err := outcomeRecord(o)
	if rec == nil || err != nil {
		return err
	}
	ev.Outcome, _ = rec["type"].(string)
	m := ev.ProtoReflect()
	switch ev.Outcome {
	case "success":
		return setField(m, m.Descriptor().Fields().ByName("pending_tool_call_ids"), rec["pendingToolCallIds"], "outcome.pendingToolCallIds")
	case "interrupt":
		return setField(m, m.Descriptor().Fields().ByName("interrupts"), rec["interrupts"], "outcome.interrupts")
	}
	return nil
}

func subagentFinishedOutcome(ev *aguipb.SubagentFinishedEvent, o map[string]any) error {
	rec, err := outcomeRecord(o)
	if rec == nil || err != nil {
		return err
	}
	ev.Outcome, _ = rec["type"].(string)
	if ev.Outcome == "suspended" {
		m := ev.ProtoReflect()
		return setField(m, m.Descriptor().Fields().ByName("interrupt_ids"), rec["interruptIds"], "outcome.interruptIds")
	}
	return nil
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

func toolResultContent(o map[string]any) (*string, []*aguipb.InputContent, error) {
	switch c := o["content"].(type) {
	case nil:
		return nil, nil, nil
	case string:
		return &c, nil, nil
	case []any:
		parts, err := contentParts(c, "content")
		return nil, parts, err
	}
	return nil, nil, invalid("content", "want a string or an array of parts")
}

// Roles 1.0.0's decoder knows, and of them the ones whose content may be parts
// (it rejects parts on the others, so they are not encoded).
var (
	knownRoles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true, "tool": true, "activity": true, "reasoning": true}
	partsRoles = map[string]bool{"user": true, "tool": true}
)

// messageContent is toWireMessage: content is a string, parts (user and tool
// messages) or the activity message's object.
func messageContent(msg *aguipb.Message, o map[string]any, path string) error {
	cp := join(path, "content")
	c := o["content"]
	if items, ok := c.([]any); ok {
		if knownRoles[msg.Role] && !partsRoles[msg.Role] {
			return invalid(cp, "a %s message's content is no array of parts", msg.Role)
		}
		parts, err := contentParts(items, cp)
		msg.ContentParts = parts
		return err
	}
	if msg.Role == "activity" {
		if c == nil {
			msg.ActivityContent = &structpb.Struct{}
			return nil
		}
		s, err := toStruct(c, cp)
		msg.ActivityContent = s
		return err
	}
	s, err := optString(o, "content", cp)
	msg.Content = s
	return err
}

func contentParts(items []any, path string) ([]*aguipb.InputContent, error) {
	parts := make([]*aguipb.InputContent, 0, len(items))
	for i, item := range items {
		p, err := contentPart(item, index(path, i))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// contentPart is toProtoContentPart.
func contentPart(v any, path string) (*aguipb.InputContent, error) {
	rec, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(path, "want an object")
	}
	id, err := optString(rec, "id", join(path, "id"))
	if err != nil {
		return nil, err
	}
	meta, err := optValue(rec, "metadata", join(path, "metadata"))
	if err != nil {
		return nil, err
	}
	typ, _ := rec["type"].(string)
	if typ == "text" {
		text, err := reqString(rec, "text", join(path, "text"))
		if err != nil {
			return nil, err
		}
		return &aguipb.InputContent{Part: &aguipb.InputContent_Text{Text: &aguipb.TextInputPart{Text: text, Id: id, Metadata: meta}}}, nil
	}
	if typ == "binary" {
		return legacyBinary(rec, id, path)
	}
	var src *aguipb.InputContentSource
	if s := rec["source"]; s != nil {
		if src, err = contentSource(s, join(path, "source")); err != nil {
			return nil, err
		}
	}
	switch typ {
	case "image":
		return &aguipb.InputContent{Part: &aguipb.InputContent_Image{Image: &aguipb.ImageInputPart{Source: src, Metadata: meta, Id: id}}}, nil
	case "audio":
		return &aguipb.InputContent{Part: &aguipb.InputContent_Audio{Audio: &aguipb.AudioInputPart{Source: src, Metadata: meta, Id: id}}}, nil
	case "video":
		return &aguipb.InputContent{Part: &aguipb.InputContent_Video{Video: &aguipb.VideoInputPart{Source: src, Metadata: meta, Id: id}}}, nil
	case "document":
		return &aguipb.InputContent{Part: &aguipb.InputContent_Document{Document: &aguipb.DocumentInputPart{Source: src, Metadata: meta, Id: id}}}, nil
	}
	return nil, invalid(join(path, "type"), "unknown content part type %v", rec["type"])
}

func contentSource(v any, path string) (*aguipb.InputContentSource, error) {
	rec, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(path, "want an object")
	}
	value, err := reqString(rec, "value", join(path, "value"))
	if err != nil {
		return nil, err
	}
	mime, err := optString(rec, "mimeType", join(path, "mimeType"))
	if err != nil {
		return nil, err
	}
	switch rec["type"] {
	case "data":
		return &aguipb.InputContentSource{Source: &aguipb.InputContentSource_Data{Data: &aguipb.InputContentDataSource{Value: value, MimeType: deref(mime)}}}, nil
	case "url":
		return &aguipb.InputContentSource{Source: &aguipb.InputContentSource_Url{Url: &aguipb.InputContentUrlSource{Value: value, MimeType: mime}}}, nil
	case "file":
		provider, err := optString(rec, "provider", join(path, "provider"))
		if err != nil {
			return nil, err
		}
		return &aguipb.InputContentSource{Source: &aguipb.InputContentSource_File{File: &aguipb.InputContentFileSource{Value: value, Provider: provider, MimeType: mime}}}, nil
	}
	return nil, invalid(join(path, "type"), "unknown source type %v", rec["type"])
}

// legacyBinary maps the pre-1.0 binary part as 1.0.0 does: a document whose
// metadata keeps the binary part's filename and id.
func legacyBinary(rec map[string]any, id *string, path string) (*aguipb.InputContent, error) {
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
	var src *aguipb.InputContentSource
	switch {
	case deref(data) != "":
		src = &aguipb.InputContentSource{Source: &aguipb.InputContentSource_Data{Data: &aguipb.InputContentDataSource{Value: *data, MimeType: deref(mime)}}}
	case deref(url) != "":
		src = &aguipb.InputContentSource{Source: &aguipb.InputContentSource_Url{Url: &aguipb.InputContentUrlSource{Value: *url, MimeType: mime}}}
	case deref(id) != "":
		src = &aguipb.InputContentSource{Source: &aguipb.InputContentSource_Url{Url: &aguipb.InputContentUrlSource{Value: *id, MimeType: mime}}}
	default:
		return nil, invalid(path, "a binary part needs data, url or id")
	}
	meta := map[string]any{"legacyBinary": true}
	if f, ok := rec["filename"]; ok && f != nil {
		meta["filename"] = f
	}
	if id != nil {
		meta["id"] = *id
	}
	mv, err := toValue(meta, join(path, "metadata"))
	if err != nil {
		return nil, err
	}
	return &aguipb.InputContent{Part: &aguipb.InputContent_Document{Document: &aguipb.DocumentInputPart{Source: src, Metadata: mv}}}, nil
}

// patchOp sets op (the lowercase JSON name of the enum) and value (where
// null is the value null, a thing a patch may add).
func patchOp(op *aguipb.JsonPatchOperation, o map[string]any, path string) error {
	name, ok := o["op"].(string)
	// The enum's own name lowercased, exactly ("teſt" upper-cases to TEST).
	n, known := aguipb.JsonPatchOperationType_value[strings.ToUpper(name)]
	if !ok || !known || name != strings.ToLower(aguipb.JsonPatchOperationType(n).String()) {
		return invalid(join(path, "op"), "unknown patch operation %v", o["op"])
	}
	op.Op = aguipb.JsonPatchOperationType(n)
	if v, ok := o["value"]; ok {
		val, err := toValue(v, join(path, "value"))
		if err != nil {
			return err
		}
		op.Value = val
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
