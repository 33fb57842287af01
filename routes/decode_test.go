package routes_test

// Request bodies are decoded as OpenCode's validators read them: keys
// match case-sensitively (a differently cased key is unknown, and unknown
// keys are ignored), and, where we deliberately differ from JSON.parse, a
// key twice in one object is a 400 naming it. Decoding errors keep their
// texts: they are mapped from the decoder's error types, not its messages.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

func TestStrictKeys(t *testing.T) {
	c := biStart(t, testserver.Options{})
	const (
		v1    = "/session/{ses}/message"
		v2    = "/api/session/{ses}/prompt"
		part  = `{"type":"text","text":"x"}`
		parts = `"parts":[` + part + `]`
	)
	cases := []struct {
		name, path, body string
		status           int
		msg              string // the exact message; "…" at the end: a prefix
		field            string // the v2 shape's field member
	}{
		// Case-sensitive keys: the differently cased key is ignored.
		{name: "PARTS is not parts", path: v1, body: `{"PARTS":[` + part + `]}`, status: 400, msg: `Missing key at ["parts"]`},
		{name: "Parts beside parts is no duplicate", path: v1, body: `{` + parts + `,"Parts":[]}`, status: 200},
		{name: "part Text is not text", path: v1, body: `{"parts":[{"type":"text","Text":"x"}]}`, status: 400, msg: `Missing key at ["parts.0.text"]`},
		{name: "part TYPE is not type", path: v1, body: `{"parts":[{"TYPE":"text","text":"x"}]}`, status: 400, msg: `Missing key at ["parts.0.type"]`},
		{name: "MessageID is not messageID", path: v1, body: `{"MessageID":"not-an-id",` + parts + `}`, status: 200},
		{name: "model ModelID is not modelID", path: v1, body: `{"model":{"providerID":"scripted","ModelID":"scripted-model"},` + parts + `}`, status: 400, msg: "model needs providerID and modelID"},
		{name: "v2 Prompt is not prompt", path: v2, body: `{"Prompt":{"text":"x"}}`, status: 400, msg: `Missing key at ["prompt"]`, field: "prompt"},
		{name: "v2 TEXT is not text", path: v2, body: `{"prompt":{"TEXT":"x"}}`, status: 400, msg: `Missing key at ["prompt.text"]`, field: "prompt.text"},
		{name: "permission Action is not action", path: "/session", body: `{"permission":[{"permission":"bash","pattern":"*","Action":"deny"}]}`, status: 400, msg: `Missing key at ["permission.0.action"]`},

		// Duplicate keys, at any depth, raw sub-values included.
		{name: "duplicate parts", path: v1, body: `{` + parts + `,` + parts + `}`, status: 400, msg: `Duplicate key at ["parts"]`},
		{name: "duplicate parts, escaped", path: v1, body: `{` + parts + `,"p\u0061rts":[` + part + `]}`, status: 400, msg: `Duplicate key at ["parts"]`},
		{name: "duplicate text in a part", path: v1, body: `{"parts":[{"type":"text","text":"a","text":"b"}]}`, status: 400, msg: `Duplicate key at ["parts.0.text"]`},
		{name: "duplicate in a second part", path: v1, body: `{"parts":[` + part + `,{"type":"text","type":"text","text":"b"}]}`, status: 400, msg: `Duplicate key at ["parts.1.type"]`},
		{name: "duplicate in part metadata", path: v1, body: `{"parts":[{"type":"text","text":"x","metadata":{"a":1,"b":{"c":1,"c":2}}}]}`, status: 400, msg: `Duplicate key at ["parts.0.metadata.b.c"]`},
		{name: "duplicate in model", path: v1, body: `{"model":{"providerID":"scripted","modelID":"scripted-model","modelID":"x"},` + parts + `}`, status: 400, msg: `Duplicate key at ["model.modelID"]`},
		{name: "duplicate unknown key", path: v1, body: `{"extra":1,"extra":2,` + parts + `}`, status: 400, msg: `Duplicate key at ["extra"]`},
		{name: "v2 duplicate text", path: v2, body: `{"prompt":{"text":"x","text":"y"}}`, status: 400, msg: `Duplicate key at ["prompt.text"]`, field: "prompt.text"},
		{name: "v2 duplicate prompt", path: v2, body: `{"prompt":{"text":"x"},"prompt":{"text":"y"}}`, status: 400, msg: `Duplicate key at ["prompt"]`, field: "prompt"},
		{name: "create duplicate title", path: "/session", body: `{"title":"a","title":"b"}`, status: 400, msg: `Duplicate key at ["title"]`},
		{name: "create duplicate metadata key", path: "/session", body: `{"metadata":{"k":1,"k":2}}`, status: 400, msg: `Duplicate key at ["metadata.k"]`},
		{name: "v2 create duplicate id", path: "/api/session", body: `{"id":"ses_a","id":"ses_b"}`, status: 400, msg: `Duplicate key at ["id"]`, field: "id"},

		// Valid bodies and unknown keys work as before.
		{name: "valid v1", path: v1, body: `{` + parts + `}`, status: 200},
		{name: "unknown keys everywhere", path: v1, body: `{"future":{"a":[1]},"parts":[{"type":"text","text":"x","later":true}],"model":{"providerID":"scripted","modelID":"scripted-model","x":1}}`, status: 200},
		{name: "valid v2", path: v2, body: `{"prompt":{"text":"x","future":[]},"nope":1}`, status: 200},
		{name: "same key in sibling objects", path: v1, body: `{"parts":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, status: 200},

		// Type and syntax errors keep their texts.
		{name: "text a number", path: v1, body: `{"parts":[{"type":"text","text":1}]}`, status: 400, msg: `Expected a string at ["parts.0.text"], got number`},
		{name: "time.start a fraction", path: v1, body: `{"parts":[{"type":"text","text":"x","time":{"start":1.5}}]}`, status: 400, msg: `Expected an integer at ["parts.0.time.start"], got number 1.5`},
		{name: "noReply a string", path: v1, body: `{"noReply":"yes",` + parts + `}`, status: 400, msg: `Expected a boolean at ["noReply"], got string`},
		{name: "tools an array", path: v1, body: `{"tools":["bash"],` + parts + `}`, status: 400, msg: `Expected an object at ["tools"], got array`},
		{name: "body an array", path: v1, body: `[]`, status: 400, msg: `Expected an object for the request body, got array`},
		{name: "v2 text a number", path: v2, body: `{"prompt":{"text":5}}`, status: 400, msg: `Expected a string at ["prompt.text"], got number`, field: "prompt.text"},
		{name: "v2 file uri a number", path: v2, body: `{"prompt":{"text":"x","files":[{"uri":1}]}}`, status: 400, msg: `Expected a string at ["prompt.files.0.uri"], got number`, field: "prompt.files.0.uri"},
		{name: "malformed", path: v1, body: `{"parts":x}`, status: 400, msg: `malformed JSON at offset 9: …`},
		{name: "truncated", path: v1, body: `{"parts":[` + part, status: 400, msg: `malformed JSON: unexpected end of input`},
		{name: "trailing data", path: v1, body: `{` + parts + `} {}`, status: 400, msg: `unexpected data after the JSON value`},
		{name: "trailing garbage", path: v1, body: `{` + parts + `} x`, status: 400, msg: `unexpected data after the JSON value`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := *c
			cc.t = t
			ses := cc.newSession()
			path := strings.ReplaceAll(tc.path, "{ses}", ses)
			r := cc.must("POST", path, "application/json", []byte(tc.body))
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, biClip(r.body))
			}
			if r.status >= 400 {
				for _, p := range biErrorShape(path, r, tc.field) {
					t.Error(p)
				}
				var e struct {
					Message string `json:"message"`
					Field   string `json:"field"`
					Data    struct {
						Message string `json:"message"`
					} `json:"data"`
				}
				if err := json.Unmarshal(r.body, &e); err != nil {
					t.Fatal(err)
				}
				msg := e.Message + e.Data.Message
				if want, ok := strings.CutSuffix(tc.msg, "…"); ok {
					if !strings.HasPrefix(msg, want) || len(msg) == len(want) {
						t.Errorf("message %q, want %q followed by the detail", msg, want)
					}
				} else if msg != tc.msg {
					t.Errorf("message %q, want %q", msg, tc.msg)
				}
				if tc.field != "" && e.Field != tc.field {
					t.Errorf("field %q, want %q", e.Field, tc.field)
				}
				if strings.HasPrefix(tc.path, "/session/{ses}") || strings.HasPrefix(tc.path, "/api/session/{ses}") {
					if got := cc.admitted(ses); len(got) > 0 {
						t.Errorf("a rejected request admitted: %v", got)
					}
				}
				return
			}
			if strings.Contains(tc.path, "{ses}") {
				if w := cc.must("POST", "/api/session/"+ses+"/wait", "", nil); w.status != 204 {
					t.Errorf("wait: %d %s", w.status, w.body)
				}
				if got := cc.admitted(ses); len(got) == 0 {
					t.Errorf("an accepted prompt admitted nothing")
				}
			}
		})
	}
}
