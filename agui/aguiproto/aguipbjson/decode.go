package aguipbjson

import (
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
)

// JSON returns an envelope's event in its JSON form, as @ag-ui/proto 1.0.0's
// decode gives it: the type from the arm, the wire's defaults filled in for
// required fields ("" and []), outcome and content put back in their JSON
// shapes. Numbers are float64 (int64 for timestamp and token counts); a
// non-finite number is null, as JSON.stringify writes it.
func JSON(ev *aguipb.Event) (map[string]any, error) {
	m := ev.ProtoReflect()
	od := m.Descriptor().Oneofs().ByName("event")
	fd := m.WhichOneof(od)
	if fd == nil {
		return nil, invalid("", "the envelope carries no event")
	}
	typ := strings.ToUpper(string(fd.Name()))
	arm := m.Get(fd).Message()
	bf := arm.Descriptor().Fields().ByName("base_event")
	if !arm.Has(bf) {
		return nil, invalid("", "%s without its base event", typ)
	}
	base := arm.Get(bf).Message().Interface().(*aguipb.BaseEvent)
	if base.Type.String() != typ {
		return nil, invalid("", "envelope carries %s but the base event declares %s", typ, base.Type)
	}
	out, err := toJSON(arm)
	if err != nil {
		return nil, err
	}
	out["type"] = typ
	if base.Timestamp != nil {
		if out["timestamp"], err = safeOut(*base.Timestamp, "timestamp"); err != nil {
			return nil, err
		}
	}
	if base.RawEvent != nil {
		setValue(out, "rawEvent", base.RawEvent)
	}
	if base.Metadata != nil {
		out["metadata"] = fromStruct(base.Metadata)
	}

	switch a := ev.Event.(type) {
	case *aguipb.Event_MessagesSnapshot:
		msgs, err := messagesJSON(a.MessagesSnapshot.Messages)
		if err != nil {
			return nil, err
		}
		out["messages"] = msgs
	case *aguipb.Event_RunStarted:
		if in := a.RunStarted.Input; in != nil {
			if out["input"], err = runInputJSON(in); err != nil {
				return nil, err
			}
		}
	case *aguipb.Event_RunFinished:
		e := a.RunFinished
		pending, interrupts := out["pendingToolCallIds"], out["interrupts"]
		delete(out, "outcome")
		delete(out, "pendingToolCallIds")
		delete(out, "interrupts")
		if e.Outcome == "" {
			if len(e.PendingToolCallIds) > 0 {
				out["pendingToolCallIds"] = pending
			}
			if len(e.Interrupts) > 0 {
				out["interrupts"] = interrupts
			}
		} else {
			oc := map[string]any{"type": e.Outcome}
			if len(e.PendingToolCallIds) > 0 {
				oc["pendingToolCallIds"] = pending
			}
			if len(e.Interrupts) > 0 || e.Outcome == "interrupt" {
				oc["interrupts"] = interrupts
			}
			out["outcome"] = oc
		}
		if len(e.Usage) == 0 {
			delete(out, "usage")
		}
	case *aguipb.Event_RunError:
		if len(a.RunError.Usage) == 0 {
			delete(out, "usage")
		}
	case *aguipb.Event_SubagentFinished:
		e := a.SubagentFinished
		ids := out["interruptIds"]
		delete(out, "outcome")
		delete(out, "interruptIds")
		if e.Outcome == "" {
			if len(e.InterruptIds) > 0 {
				out["interruptIds"] = ids
			}
		} else {
			oc := map[string]any{"type": e.Outcome}
			if len(e.InterruptIds) > 0 {
				oc["interruptIds"] = ids
			}
			out["outcome"] = oc
		}
	case *aguipb.Event_StateDelta:
		out["delta"] = patchJSON(a.StateDelta.Delta)
	case *aguipb.Event_ActivityDelta:
		out["patch"] = patchJSON(a.ActivityDelta.Patch)
	case *aguipb.Event_ToolCallResult:
		e := a.ToolCallResult
		if e.Content != nil && len(e.ContentParts) > 0 {
			return nil, invalid("", "content carries both string content and content parts")
		}
		if e.Content == nil {
			out["content"] = partsJSON(e.ContentParts)
		}
		delete(out, "contentParts")
	}
	return out, nil
}

// toJSON is ts-proto's decode of one message: implicit-presence scalars
// always (their default when unset), optional ones when set, lists always.
func toJSON(m protoreflect.Message) (map[string]any, error) {
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Name() == "base_event" {
			continue
		}
		key := fd.JSONName()
		if fd.IsList() {
			list := m.Get(fd).List()
			items := make([]any, 0, list.Len())
			for j := range list.Len() {
				item := list.Get(j)
				if fd.Kind() == protoreflect.MessageKind {
					sub, err := toJSON(item.Message())
					if err != nil {
						return nil, err
					}
					items = append(items, sub)
					continue
				}
				v, err := scalarOut(fd, item, key)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			out[key] = items
			continue
		}
		if fd.Kind() == protoreflect.MessageKind {
			if !m.Has(fd) {
				continue
			}
			msg := m.Get(fd).Message().Interface()
			switch x := msg.(type) {
			case *structpb.Value:
				setValue(out, key, x)
			case *structpb.Struct:
				out[key] = fromStruct(x)
			default:
				sub, err := toJSON(m.Get(fd).Message())
				if err != nil {
					return nil, err
				}
				out[key] = sub
			}
			continue
		}
		if fd.HasPresence() && !m.Has(fd) {
			continue
		}
		v, err := scalarOut(fd, m.Get(fd), key)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

func scalarOut(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) (any, error) {
	switch fd.Kind() {
	case protoreflect.Int64Kind:
		return safeOut(v.Int(), path)
	case protoreflect.EnumKind:
		return int64(v.Enum()), nil
	}
	return v.Interface(), nil
}

// safeOut is longToNumber: a JavaScript number cannot hold more.
func safeOut(n int64, path string) (int64, error) {
	if n > maxSafeInteger || n < -maxSafeInteger {
		return 0, invalid(path, "integer beyond ±(2^53-1)")
	}
	return n, nil
}

// setValue sets key to a Value's JSON form; a Value with no kind is no value
// (Value.unwrap gives undefined), so the key stays absent.
func setValue(o map[string]any, key string, v *structpb.Value) {
	if j, ok := fromValue(v); ok {
		o[key] = j
	}
}

func fromValue(v *structpb.Value) (any, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return nil, true
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil, true
		}
		return k.NumberValue, true
	case *structpb.Value_StringValue:
		return k.StringValue, true
	case *structpb.Value_BoolValue:
		return k.BoolValue, true
	case *structpb.Value_StructValue:
		return fromStruct(k.StructValue), true
	case *structpb.Value_ListValue:
		items := make([]any, 0, len(k.ListValue.GetValues()))
		for _, item := range k.ListValue.GetValues() {
			j, _ := fromValue(item) // an empty Value in a list is undefined there, null in JSON
			items = append(items, j)
		}
		return items, true
	}
	return nil, false
}

func fromStruct(s *structpb.Struct) map[string]any {
	out := make(map[string]any, len(s.GetFields()))
	for k, v := range s.GetFields() {
		if j, ok := fromValue(v); ok {
			out[k] = j
		}
	}
	return out
}

func patchJSON(ops []*aguipb.JsonPatchOperation) []any {
	out := make([]any, 0, len(ops))
	for _, op := range ops {
		name, ok := aguipb.JsonPatchOperationType_name[int32(op.Op)]
		if ok {
			name = strings.ToLower(name)
		} else {
			name = strconv.Itoa(int(op.Op))
		}
		o := map[string]any{"op": name, "path": op.Path}
		if op.From != nil {
			o["from"] = *op.From
		}
		if op.Value != nil {
			setValue(o, "value", op.Value)
		}
		out = append(out, o)
	}
	return out
}

// messagesJSON is fromWireMessage on each message.
func messagesJSON(msgs []*aguipb.Message) ([]any, error) {
	out := make([]any, 0, len(msgs))
	for _, msg := range msgs {
		o, err := messageJSON(msg)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func messageJSON(msg *aguipb.Message) (map[string]any, error) {
	o, err := toJSON(msg.ProtoReflect())
	if err != nil {
		return nil, err
	}
	known := knownRoles[msg.Role]
	hasParts := len(msg.ContentParts) > 0
	usesParts := hasParts
	usesMap := !usesParts && msg.ActivityContent != nil
	if known {
		usesParts = partsRoles[msg.Role]
		usesMap = msg.Role == "activity"
		switch {
		case !usesParts && hasParts:
			return nil, invalid("", "message carries content parts for a role that has none")
		case msg.ActivityContent != nil && !usesMap:
			return nil, invalid("", "message carries activity content for a non-activity role")
		case usesMap && msg.Content != nil:
			return nil, invalid("", "activity content cannot ride with other content forms")
		case usesParts && msg.Content != nil && hasParts:
			return nil, invalid("", "message carries both string content and content parts")
		}
	} else {
		forms := 0
		for _, set := range []bool{msg.Content != nil, hasParts, msg.ActivityContent != nil} {
			if set {
				forms++
			}
		}
		if forms > 1 {
			return nil, invalid("", "message carries more than one content form")
		}
	}
	if usesParts && msg.Content == nil {
		o["content"] = partsJSON(msg.ContentParts)
	}
	if usesMap && msg.ActivityContent != nil {
		o["content"] = fromStruct(msg.ActivityContent)
	}
	delete(o, "activityContent")
	delete(o, "contentParts")
	if len(msg.ToolCalls) == 0 {
		delete(o, "toolCalls")
	}
	return o, nil
}

// partsJSON is fromProtoContentPart on each part; a part with no arm this
// build knows, or a media part whose source has none, is dropped.
func partsJSON(parts []*aguipb.InputContent) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		var (
			typ  string
			id   *string
			src  *aguipb.InputContentSource
			meta *structpb.Value
		)
		switch x := p.GetPart().(type) {
		case *aguipb.InputContent_Text:
			o := map[string]any{"type": "text", "text": x.Text.GetText()}
			if x.Text.Id != nil {
				o["id"] = *x.Text.Id
			}
			if x.Text.Metadata != nil {
				setValue(o, "metadata", x.Text.Metadata)
			}
			out = append(out, o)
			continue
		case *aguipb.InputContent_Image:
			typ, id, src, meta = "image", x.Image.Id, x.Image.Source, x.Image.Metadata
		case *aguipb.InputContent_Audio:
			typ, id, src, meta = "audio", x.Audio.Id, x.Audio.Source, x.Audio.Metadata
		case *aguipb.InputContent_Video:
			typ, id, src, meta = "video", x.Video.Id, x.Video.Source, x.Video.Metadata
		case *aguipb.InputContent_Document:
			typ, id, src, meta = "document", x.Document.Id, x.Document.Source, x.Document.Metadata
		default:
			continue
		}
		o := map[string]any{"type": typ}
		if id != nil {
			o["id"] = *id
		}
		if src != nil {
			s := sourceJSON(src)
			if s == nil {
				continue
			}
			o["source"] = s
		}
		if meta != nil {
			setValue(o, "metadata", meta)
		}
		out = append(out, o)
	}
	return out
}

func sourceJSON(src *aguipb.InputContentSource) map[string]any {
	switch x := src.GetSource().(type) {
	case *aguipb.InputContentSource_Data:
		return map[string]any{"type": "data", "value": x.Data.GetValue(), "mimeType": x.Data.GetMimeType()}
	case *aguipb.InputContentSource_Url:
		o := map[string]any{"type": "url", "value": x.Url.GetValue()}
		if x.Url.MimeType != nil {
			o["mimeType"] = *x.Url.MimeType
		}
		return o
	case *aguipb.InputContentSource_File:
		o := map[string]any{"type": "file", "value": x.File.GetValue()}
		if x.File.Provider != nil {
			o["provider"] = *x.File.Provider
		}
		if x.File.MimeType != nil {
			o["mimeType"] = *x.File.MimeType
		}
		return o
	}
	return nil
}

// runInputJSON is fromWireRunAgentInput.
func runInputJSON(in *aguipb.RunAgentInput) (map[string]any, error) {
	o, err := toJSON(in.ProtoReflect())
	if err != nil {
		return nil, err
	}
	msgs, err := messagesJSON(in.Messages)
	if err != nil {
		return nil, err
	}
	o["messages"] = msgs
	return o, nil
}
