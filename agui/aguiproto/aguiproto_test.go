package aguiproto_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	. "github.com/opencode-server/opencode-server/agui/aguiproto"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipbjson"
)

var oursOut = flag.String("ours", "", "write our frames for testdata/events.json to this file, for record.mjs decode")

type eventCase struct {
	Name     string          `json:"name"`
	Event    json.RawMessage `json:"event"`
	MapOrder bool            `json:"mapOrder"` // Struct keys not in sorted order: bytes may differ, content may not
	// What @ag-ui/proto's decode gives back where it is not the event itself
	// (optional nulls and keys the wire has no field for are gone).
	DecodedAs json.RawMessage `json:"decodedAs"`
}

func loadEvents(t testing.TB) []eventCase {
	t.Helper()
	data, err := os.ReadFile("testdata/events.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []eventCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// readLines reads a recording: one JSON object per line.
func readLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type recorded struct {
	Name     string         `json:"name"`
	Frame    string         `json:"frame"`
	Decoded  map[string]any `json:"decoded"`
	Warnings []string       `json:"warnings"`
}

func unframe(t *testing.T, frame []byte) *aguipb.Event {
	t.Helper()
	r := bytes.NewReader(frame)
	ev, err := aguipbjson.ReadFrame(r)
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes after the frame", r.Len())
	}
	return ev
}

// TestGolden: our frame for each event in testdata/events.json is the one
// @ag-ui/encoder 1.0.0's EventEncoder wrote (testdata/encoder-1.0.0.golden),
// byte for byte; where the event's objects have keys out of sorted order
// (mapOrder), the bytes may differ in map-entry order only, so both are read
// back and compared as messages.
func TestGolden(t *testing.T) {
	cases := loadEvents(t)
	golden := map[string]recorded{}
	for _, g := range readLines[recorded](t, "testdata/encoder-1.0.0.golden") {
		golden[g.Name] = g
	}
	if len(golden) != len(cases) {
		t.Fatalf("%d golden frames for %d events: record again (testdata/record.mjs)", len(golden), len(cases))
	}
	var ours []map[string]string
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			g, ok := golden[c.Name]
			if !ok {
				t.Fatal("no golden frame: record again (testdata/record.mjs)")
			}
			if len(g.Warnings) > 0 {
				t.Fatalf("@ag-ui/proto warned encoding this event (not a valid AG-UI event?): %v", g.Warnings)
			}
			want, err := hex.DecodeString(g.Frame)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Encode(c.Event)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			ours = append(ours, map[string]string{"name": c.Name, "frame": hex.EncodeToString(got)})
			if !proto.Equal(unframe(t, got), unframe(t, want)) {
				t.Fatalf("content differs\n got %x\nwant %x", got, want)
			}
			if !c.MapOrder && !bytes.Equal(got, want) {
				t.Fatalf("bytes differ\n got %x\nwant %x", got, want)
			}
			if c.MapOrder && bytes.Equal(got, want) {
				t.Fatal("mapOrder case encodes identically: it no longer tests what it says")
			}
		})
	}
	if *oursOut != "" {
		data, _ := json.Marshal(ours)
		if err := os.WriteFile(*oursOut, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecodedByProto: @ag-ui/proto 1.0.0's decode read our frames
// (testdata/decoded-by-proto-1.0.0.golden) as the events we encoded (or their
// decodedAs), and what it read is what JSON reads from them; the recorded
// frames are still the ones Encode writes.
func TestDecodedByProto(t *testing.T) {
	events := map[string]eventCase{}
	for _, c := range loadEvents(t) {
		events[c.Name] = c
	}
	recs := readLines[recorded](t, "testdata/decoded-by-proto-1.0.0.golden")
	if len(recs) != len(events) {
		t.Fatalf("%d decoded frames for %d events: record again (testdata/record.mjs)", len(recs), len(events))
	}
	for _, rec := range recs {
		t.Run(rec.Name, func(t *testing.T) {
			c, ok := events[rec.Name]
			if !ok {
				t.Fatal("recorded frame for an event no longer in events.json")
			}
			if len(rec.Warnings) > 0 {
				t.Fatalf("@ag-ui/proto warned decoding our frame: %v", rec.Warnings)
			}
			frame, _ := hex.DecodeString(rec.Frame)
			got, err := Encode(c.Event)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, frame) {
				t.Fatalf("Encode no longer writes the recorded frame: record again\n got %x\nwant %x", got, frame)
			}
			sent := c.Event
			if c.DecodedAs != nil {
				sent = c.DecodedAs
			}
			var want any
			if err := json.Unmarshal(sent, &want); err != nil {
				t.Fatal(err)
			}
			if g, w := normal(t, rec.Decoded), normal(t, want); !reflect.DeepEqual(g, w) {
				t.Errorf("@ag-ui/proto decoded\n%s\nwe sent\n%s", mustJSON(g), mustJSON(w))
			}
			j, err := aguipbjson.JSON(unframe(t, frame))
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if g, w := normal(t, j), normal(t, rec.Decoded); !reflect.DeepEqual(g, w) {
				t.Fatalf("JSON reads\n%s\n@ag-ui/proto decoded\n%s", mustJSON(g), mustJSON(w))
			}
		})
	}
}

// normal is a value's JSON form read back, so Go and recorded values compare.
func normal(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestGoldenCoversEveryEvent: the golden table has every event type of 1.0.0
// (a new arm without a golden frame fails here).
func TestGoldenCoversEveryEvent(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range loadEvents(t) {
		var head struct{ Type string }
		_ = json.Unmarshal(c.Event, &head)
		seen[head.Type] = true
	}
	for name := range aguipb.EventType_value {
		if !seen[name] {
			t.Errorf("no event of type %s in testdata/events.json", name)
		}
	}
}

type wireField struct {
	Name     string `json:"name"`
	Number   int    `json:"number"`
	Kind     string `json:"kind"`
	Type     string `json:"type"`
	Repeated bool   `json:"repeated"`
	Presence string `json:"presence"`
}

// TestSchemaMatches1_0_0: every message and enum of @ag-ui/proto 1.0.0, as
// testdata/wire-schema.mjs read them off its compiled encoders, is in
// proto/ag_ui/*.proto with the same fields: JSON name, number, type,
// repetition and presence; and the .proto files declare nothing more.
func TestSchemaMatches1_0_0(t *testing.T) {
	data, err := os.ReadFile("testdata/wire-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Messages map[string][]wireField      `json:"messages"`
		Enums    map[string]map[string]int32 `json:"enums"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	declared := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	for _, path := range []string{"ag_ui/events.proto", "ag_ui/types.proto", "ag_ui/patch.proto"} {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatal(err)
		}
		var walk func(protoreflect.MessageDescriptors)
		walk = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				declared[ms.Get(i).FullName()] = ms.Get(i)
				walk(ms.Get(i).Messages())
			}
		}
		walk(fd.Messages())
	}
	fullName := func(js string) protoreflect.FullName {
		return protoreflect.FullName("ag_ui." + strings.ReplaceAll(js, "_", "."))
	}
	for name, fields := range schema.Messages {
		md, ok := declared[fullName(name)]
		if !ok {
			t.Errorf("%s: in 1.0.0, not in the .proto files", name)
			continue
		}
		delete(declared, md.FullName())
		if md.Fields().Len() != len(fields) {
			t.Errorf("%s: %d fields, 1.0.0 has %d", name, md.Fields().Len(), len(fields))
		}
		for _, f := range fields {
			fd := md.Fields().ByNumber(protoreflect.FieldNumber(f.Number))
			if fd == nil {
				t.Errorf("%s.%s: no field %d", name, f.Name, f.Number)
				continue
			}
			if fd.JSONName() != f.Name {
				t.Errorf("%s field %d: named %s, 1.0.0 %s", name, f.Number, fd.JSONName(), f.Name)
			}
			if fd.IsList() != f.Repeated {
				t.Errorf("%s.%s: repeated %v, 1.0.0 %v", name, f.Name, fd.IsList(), f.Repeated)
			}
			if !f.Repeated && fd.HasPresence() != (f.Presence == "explicit") {
				t.Errorf("%s.%s: presence %v, 1.0.0 %s", name, f.Name, fd.HasPresence(), f.Presence)
			}
			switch f.Kind {
			case "message":
				want := fullName(f.Type)
				if f.Type == "Value" || f.Type == "Struct" || f.Type == "ListValue" {
					want = protoreflect.FullName("google.protobuf." + f.Type)
				}
				if fd.Kind() != protoreflect.MessageKind || fd.Message().FullName() != want {
					t.Errorf("%s.%s: %s %s, 1.0.0 message %s", name, f.Name, fd.Kind(), fd.Message().FullName(), want)
				}
			case "int32": // ts-proto writes an enum as int32
				if fd.Kind() != protoreflect.EnumKind && fd.Kind() != protoreflect.Int32Kind {
					t.Errorf("%s.%s: %s, 1.0.0 int32/enum", name, f.Name, fd.Kind())
				}
			default:
				if fd.Kind().String() != f.Kind {
					t.Errorf("%s.%s: %s, 1.0.0 %s", name, f.Name, fd.Kind(), f.Kind)
				}
			}
		}
	}
	for name := range declared {
		t.Errorf("%s: in the .proto files, not in 1.0.0", name)
	}
	enums := map[string]protoreflect.EnumDescriptor{
		"EventType":              aguipb.EventType(0).Descriptor(),
		"JsonPatchOperationType": aguipb.JsonPatchOperationType(0).Descriptor(),
	}
	for name, ed := range enums {
		values := schema.Enums[name]
		if ed.Values().Len() != len(values) {
			t.Errorf("enum %s: %d values, 1.0.0 has %d", name, ed.Values().Len(), len(values))
		}
		for v, n := range values {
			ev := ed.Values().ByName(protoreflect.Name(v))
			if ev == nil || int32(ev.Number()) != n {
				t.Errorf("enum %s: %s should be %d", name, v, n)
			}
		}
	}
	if len(schema.Enums) != len(enums)+1 { // + google.protobuf.NullValue
		t.Errorf("1.0.0 has enums %v", schema.Enums)
	}
}

// TestEncodeInvalid: what 1.0.0 would encode as mangled best effort is an
// error here, naming the field.
func TestEncodeInvalid(t *testing.T) {
	for _, tc := range []struct{ event, want string }{
		{`[]`, "JSON object"},
		{`{"messageId":"m"}`, "type: missing"},
		{`{"type":"NOPE"}`, "unknown event type"},
		{`{"type":"text_message_start"}`, "unknown event type"},
		{`{"type":"TEXT_MESSAGE_CONTENT","messageId":5,"delta":"x"}`, "messageId: want a string"},
		{`{"type":"TEXT_MESSAGE_CONTENT","messageId":null,"delta":"x"}`, "messageId: null for a required field"},
		{`{"type":"TEXT_MESSAGE_START","messageId":"m","timestamp":1.5}`, "timestamp: want an integer"},
		{`{"type":"TEXT_MESSAGE_START","messageId":"m","timestamp":9007199254740992}`, "timestamp: integer beyond"},
		{`{"type":"TEXT_MESSAGE_START","messageId":"m","metadata":[1]}`, "metadata: want an object"},
		{`{"type":"STATE_DELTA","delta":[{"op":"bogus","path":"/a"}]}`, "delta[0].op: unknown patch operation"},
		{`{"type":"STATE_DELTA","delta":{}}`, "delta: want an array"},
		{`{"type":"STATE_SNAPSHOT","snapshot":1e400}`, "out of a double's range"},
		{`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":"success"}`, "outcome: want an object"},
		{`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","pendingToolCallIds":[1]}}`, "outcome.pendingToolCallIds[0]: want a string"},
		{`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":1}]}}`, "outcome.interrupts[0].id: want a string"},
		{`{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":{}}`, "content: want a string or an array"},
		{`{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":[{"type":"gif"}]}`, "content[0].type: unknown content part type"},
		{`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","content":[{"type":"text","text":"x"}]}]}`, "messages[0].content: a assistant message's content is no array"},
		{`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":"image","source":{"type":"ftp","value":"x"}}]}]}`, "messages[0].content[0].source.type: unknown source type"},
		{`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"activity","activityType":"x","content":"s"}]}`, "messages[0].content: want an object"},
		{`{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"a","content":null}`, "content: want an object"},
		{`{"type":"STEP_STARTED","stepName":"s"} {}`, "more than one JSON value"},
		{`{"type":"STATE_SNAPSHOT","snapshot":` + strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2) + `}`, "nested deeper than"},
	} {
		_, err := Encode(json.RawMessage(tc.event))
		if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode(%.80s) = %v, want ErrInvalidEvent with %q", tc.event, err, tc.want)
		}
	}
}

// TestEncodeInputForms: a map and a struct encode as their JSON does.
func TestEncodeInputForms(t *testing.T) {
	want, err := Encode(json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	type content struct {
		Type      string `json:"type"`
		MessageID string `json:"messageId"`
		Delta     string `json:"delta"`
	}
	for _, in := range []any{
		map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_1", "delta": "hi"},
		content{"TEXT_MESSAGE_CONTENT", "msg_1", "hi"},
		[]byte(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"hi"}`),
	} {
		got, err := Encode(in)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Encode(%T) = %x, %v; want %x", in, got, err, want)
		}
	}
	if _, err := Encode(map[string]any{"type": "CUSTOM", "value": func() {}}); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("unmarshalable value: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	big := strings.Repeat("x", MaxFrame)
	_, err := Encode(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": big})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Encode of a %d-byte delta: %v, want ErrTooLarge", len(big), err)
	}
	var prefix [4]byte
	prefix[0] = 0x01 // 16 MiB
	if _, err := aguipbjson.ReadFrame(bytes.NewReader(prefix[:])); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFrame of a 16 MiB prefix: %v", err)
	}
}

func TestReadFrameStream(t *testing.T) {
	var stream []byte
	for _, ev := range []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success"}}`,
	} {
		f, err := Encode(json.RawMessage(ev))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, f...)
	}
	r := bytes.NewReader(stream)
	var types []string
	for {
		ev, err := aguipbjson.ReadFrame(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		j, err := aguipbjson.JSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, j["type"].(string))
	}
	if want := []string{"RUN_STARTED", "TEXT_MESSAGE_START", "RUN_FINISHED"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("read %v, want %v", types, want)
	}
	for _, cut := range []int{2, 4, 9} {
		if _, err := aguipbjson.ReadFrame(bytes.NewReader(stream[:cut])); err != io.ErrUnexpectedEOF {
			t.Errorf("stream cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	// A body that is no protobuf, and an envelope naming no event.
	if _, err := aguipbjson.ReadFrame(bytes.NewReader([]byte{0, 0, 0, 2, 0xff, 0xff})); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("garbage body: %v", err)
	}
	if _, err := aguipbjson.JSON(&aguipb.Event{}); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("empty envelope: %v", err)
	}
	mismatch := &aguipb.Event{Event: &aguipb.Event_TextMessageEnd{TextMessageEnd: &aguipb.TextMessageEndEvent{
		BaseEvent: &aguipb.BaseEvent{Type: aguipb.EventType_RUN_ERROR}}}}
	if _, err := aguipbjson.JSON(mismatch); !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "base event declares RUN_ERROR") {
		t.Errorf("arm and base type differ: %v", err)
	}
}

func TestAccepts(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                      false,
		"text/event-stream":                     false,
		"*/*":                                   false,
		"application/*":                         false,
		MediaType:                               true,
		"APPLICATION/VND.AG-UI.EVENT+PROTO":     true,
		"text/event-stream, " + MediaType:       true,
		MediaType + ";q=0.5, text/event-stream": true,
		MediaType + "; q=0":                     false,
		MediaType + ";q=0.0, */*":               false,
		MediaType + ";q=abc":                    false,
		" " + MediaType + " ;charset=x":         true,
		"application/vnd.ag-ui.event+protobuf":  false,
	} {
		if got := Accepts(accept); got != want {
			t.Errorf("Accepts(%q) = %v, want %v", accept, got, want)
		}
	}
}

// FuzzEncode: any JSON never panics Encode; it writes what the generated
// code's proto.Marshal writes (or both refuse it); what it encodes reads
// back, and the JSON form read back encodes to the same bytes.
func FuzzEncode(f *testing.F) {
	for _, c := range loadEvents(f) {
		f.Add([]byte(c.Event))
	}
	f.Add([]byte(`{"type":"RUN_FINISHED","outcome":{"type":"interrupt"}}`))
	f.Add([]byte(`{"type":"MESSAGES_SNAPSHOT","messages":[{"role":"x","content":[{"type":"binary","data":"aGk=","filename":"f"}]}]}`))
	f.Add([]byte(`{"type":"TOOL_CALL_RESULT"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		matchesGenerated(t, data)
		frame, err := Encode(json.RawMessage(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidEvent) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		ev := unframe(t, frame)
		j, err := aguipbjson.JSON(ev)
		if err != nil {
			t.Fatalf("JSON of our own frame: %v", err)
		}
		again, err := Encode(j)
		if err != nil {
			t.Fatalf("Encode of the JSON read back (%s): %v", mustJSON(j), err)
		}
		if !bytes.Equal(again, frame) {
			t.Fatalf("read back and encoded again differs\nfirst %x\nagain %x\njson %s", frame, again, mustJSON(j))
		}
	})
}

// TestClientReadsOurRun: @ag-ui/client 1.0.0's HttpAgent, given a protobuf
// response made of our frames (testdata/client-1.0.0.golden; the frames are
// those TestDecodedByProto holds current), saw every event of the run in
// order and ended with the state, messages and interrupts the events carry.
func TestClientReadsOurRun(t *testing.T) {
	recs := readLines[struct {
		Run               []string         `json:"run"`
		Events            []string         `json:"events"`
		Messages          []map[string]any `json:"messages"`
		State             any              `json:"state"`
		PendingInterrupts []any            `json:"pendingInterrupts"`
		Warnings          []string         `json:"warnings"`
	}](t, "testdata/client-1.0.0.golden")
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	rec := recs[0]
	if len(rec.Warnings) > 0 {
		t.Fatalf("the client warned: %v", rec.Warnings)
	}
	events := map[string]map[string]any{}
	for _, c := range loadEvents(t) {
		var e map[string]any
		if err := json.Unmarshal(c.Event, &e); err != nil {
			t.Fatal(err)
		}
		events[c.Name] = e
	}
	var types []string
	for _, name := range rec.Run {
		types = append(types, events[name]["type"].(string))
	}
	if !reflect.DeepEqual(rec.Events, types) {
		t.Fatalf("the client saw %v, the run was %v", rec.Events, types)
	}
	if g, w := normal(t, rec.State), normal(t, events["state_snapshot"]["snapshot"]); !reflect.DeepEqual(g, w) {
		t.Errorf("state %v, want %v", g, w)
	}
	outcome := events["run_finished_interrupt"]["outcome"].(map[string]any)
	if g, w := normal(t, rec.PendingInterrupts), normal(t, outcome["interrupts"]); !reflect.DeepEqual(g, w) {
		t.Errorf("pending interrupts %s, want %s", mustJSON(g), mustJSON(w))
	}
	content := map[string]any{}
	for _, m := range rec.Messages {
		content[m["id"].(string)] = m["content"]
	}
	for id, want := range map[string]string{
		"msg_a": "Let me check." + events["text_message_content"]["delta"].(string),
		"prt_1": events["tool_call_result"]["content"].(string),
		"prt_r": "thinking" + events["reasoning_message_content"]["delta"].(string),
	} {
		if content[id] != want {
			t.Errorf("message %s content %q, want %q", id, content[id], want)
		}
	}
}
