package aguiproto

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
)

// TestTablesMatchProto: the tables Encode walks are the generated
// descriptors (which TestSchemaMatches1_0_0 holds to 1.0.0's schema), field
// for field: every field of every message Encode writes is in its table, in
// field-number order, with the descriptor's number, JSON name, type,
// repetition and presence; the envelope's arms and both enums match.
func TestTablesMatchProto(t *testing.T) {
	envelope := (&aguipb.Event{}).ProtoReflect().Descriptor()
	if n := envelope.Fields().Len(); n != len(arms) {
		t.Errorf("Event has %d arms, the table %d", n, len(arms))
	}
	seen := map[*message]bool{}
	for typ, a := range arms {
		fd := envelope.Fields().ByNumber(a.num)
		if fd == nil || strings.ToUpper(string(fd.Name())) != typ {
			t.Errorf("arm %d: the table has %s, Event %v", a.num, typ, fd)
			continue
		}
		checkMessage(t, a.msg, fd.Message(), seen)
	}
	// Every message but the envelope is some table's (Encode reaches it).
	byName := map[string]bool{}
	for m := range seen {
		byName[m.name] = true
	}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			name := strings.TrimPrefix(string(ms.Get(i).FullName()), "ag_ui.")
			if name != "Event" && !byName[name] {
				t.Errorf("%s: no table reaches it", name)
			}
			walk(ms.Get(i).Messages())
		}
	}
	for _, fd := range []protoreflect.FileDescriptor{aguipb.File_ag_ui_events_proto, aguipb.File_ag_ui_types_proto, aguipb.File_ag_ui_patch_proto} {
		walk(fd.Messages())
	}
	if len(eventTypes) != len(aguipb.EventType_value) {
		t.Errorf("%d event types, EventType has %d", len(eventTypes), len(aguipb.EventType_value))
	}
	for name, n := range aguipb.EventType_value {
		if got, ok := eventTypes[name]; !ok || got != uint64(n) {
			t.Errorf("event type %s: table %d (%v), EventType %d", name, got, ok, n)
		}
		if _, ok := arms[name]; !ok {
			t.Errorf("event type %s has no arm", name)
		}
	}
	if len(patchOps) != len(aguipb.JsonPatchOperationType_value) {
		t.Errorf("%d patch ops, JsonPatchOperationType has %d", len(patchOps), len(aguipb.JsonPatchOperationType_value))
	}
	for name, n := range aguipb.JsonPatchOperationType_value {
		if got, ok := patchOps[strings.ToLower(name)]; !ok || got != uint64(n) {
			t.Errorf("patch op %s: table %d (%v), enum %d", name, got, ok, n)
		}
	}
}

func checkMessage(t *testing.T, m *message, md protoreflect.MessageDescriptor, seen map[*message]bool) {
	t.Helper()
	if seen[m] {
		return
	}
	seen[m] = true
	if want := strings.TrimPrefix(string(md.FullName()), "ag_ui."); m.name != want {
		t.Errorf("table %s stands for %s", m.name, want)
	}
	if md.Fields().Len() != len(m.fields) {
		t.Errorf("%s: %d fields, the table %d", md.FullName(), md.Fields().Len(), len(m.fields))
	}
	for i := range m.fields {
		f := &m.fields[i]
		if i > 0 && f.num <= m.fields[i-1].num {
			t.Errorf("%s.%s: out of field-number order", m.name, f.name)
		}
		fd := md.Fields().ByNumber(f.num)
		if fd == nil {
			t.Errorf("%s: no field %d (%s)", md.FullName(), f.num, f.name)
			continue
		}
		at := string(md.Name()) + "." + string(fd.Name())
		if fd.JSONName() != f.name {
			t.Errorf("%s: JSON name %s, the table %s", at, fd.JSONName(), f.name)
		}
		if fd.IsList() != f.list {
			t.Errorf("%s: repeated %v, the table %v", at, fd.IsList(), f.list)
		}
		if fd.HasOptionalKeyword() != f.opt {
			t.Errorf("%s: optional %v, the table %v", at, fd.HasOptionalKeyword(), f.opt)
		}
		if f.list && f.kind != kMessage && f.kind != kString {
			t.Errorf("%s: appendField writes no list of kind %d", at, f.kind)
		}
		var want kind
		switch fd.Kind() {
		case protoreflect.StringKind:
			want = kString
		case protoreflect.BoolKind:
			want = kBool
		case protoreflect.Int64Kind:
			want = kInt64
		case protoreflect.EnumKind:
			want = kEnum
			if f.enc == nil {
				t.Errorf("%s: an enum needs an enc hook", at)
			}
		case protoreflect.MessageKind:
			switch fd.Message().FullName() {
			case "google.protobuf.Value":
				want = kValue
			case "google.protobuf.Struct":
				want = kStruct
			default:
				want = kMessage
				if f.msg == nil {
					t.Errorf("%s: no table for %s", at, fd.Message().FullName())
				} else {
					checkMessage(t, f.msg, fd.Message(), seen)
				}
			}
		default:
			t.Errorf("%s: kind %s has no table kind", at, fd.Kind())
		}
		if f.kind != want {
			t.Errorf("%s: %s, the table has kind %d", at, fd.Kind(), f.kind)
		}
	}
}
