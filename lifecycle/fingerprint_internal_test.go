package lifecycle

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
)

// TestFingerprint: the same content under other part IDs is the same
// admission; any change of content or options is not; an input admitted by
// an older version (its fingerprint the canonical JSON) still matches.
func TestFingerprint(t *testing.T) {
	in := func(text, url, agent string, ids ...string) *opencode.Input {
		x := &opencode.Input{Agent: agent, Parts: []opencode.Part{{ID: ids[0], Type: opencode.PartText, Text: text}}}
		if url != "" {
			x.Parts = append(x.Parts, opencode.Part{ID: ids[1], Type: opencode.PartFile, URL: url, Mime: "text/plain"})
		}
		x.Fingerprint = fingerprint(x)
		return x
	}
	base := in("hello", "data:,x", "build", "prt_a", "prt_b")
	for _, c := range []struct {
		name string
		in   *opencode.Input
		same bool
	}{
		{"other part IDs", in("hello", "data:,x", "build", "prt_c", "prt_d"), true},
		{"other text", in("hellO", "data:,x", "build", "prt_a", "prt_b"), false},
		{"text moved into the URL", in("hellodata:,x", "", "build", "prt_a"), false},
		{"other URL", in("hello", "data:,y", "build", "prt_a", "prt_b"), false},
		{"other agent", in("hello", "data:,x", "plan", "prt_a", "prt_b"), false},
	} {
		if got := sameContent(base.Fingerprint, c.in); got != c.same {
			t.Errorf("%s: same = %v, want %v", c.name, got, c.same)
		}
	}
	// Client tools are part of the content; their schema's spacing is not.
	withTools := func(params string) *opencode.Input {
		x := in("hello", "data:,x", "build", "prt_a", "prt_b")
		x.ClientTools = []opencode.ClientTool{{Name: "show_card", Parameters: json.RawMessage(params)}}
		x.Fingerprint = fingerprint(x)
		return x
	}
	if sameContent(base.Fingerprint, withTools(`{}`)) {
		t.Error("an input with client tools is the same admission as one without")
	}
	if !sameContent(withTools(`{"type":"object"}`).Fingerprint, withTools(`{ "type": "object" }`)) {
		t.Error("the same client tools, spaced otherwise, are another admission")
	}
	if sameContent(withTools(`{"type":"object"}`).Fingerprint, withTools(`{"type":"string"}`)) {
		t.Error("client tools of another schema are the same admission")
	}
	if !strings.HasPrefix(base.Fingerprint, fingerprintPrefix) || len(base.Fingerprint) != len(fingerprintPrefix)+64 {
		t.Errorf("fingerprint %q is not a sha256", base.Fingerprint)
	}
	legacy, _ := json.Marshal(canonicalContent(base))
	if !sameContent(string(legacy), in("hello", "data:,x", "build", "prt_e", "prt_f")) {
		t.Error("an input admitted with a legacy (JSON) fingerprint no longer matches its retry")
	}
	if sameContent(string(legacy), in("other", "data:,x", "build", "prt_e", "prt_f")) {
		t.Error("a legacy fingerprint matches other content")
	}
}

func TestCleanTitle(t *testing.T) {
	long := strings.Repeat("é", 120)
	for _, c := range []struct{ in, want string }{
		{"  Fix the login bug  ", "Fix the login bug"},
		{"\n\nFirst line\nsecond", "First line"},
		{"<think>let me see\nmore</think>\nRefactor parser", "Refactor parser"},
		{"<think>never closed", ""},
		{long, strings.Repeat("é", 97) + "..."},
	} {
		if got := cleanTitle(c.in); got != c.want {
			t.Errorf("cleanTitle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
