package jsonw

import (
	"encoding/json"
	"testing"
)

func TestAppendString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"<&>", `"<&>"`},
		{"line\nnext\ttab\r\b\f\x01", `"line\nnext\ttab\r\b\f\u0001"`},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
		{"é✓", `"é✓"`},
	} {
		got := string(AppendString(nil, c.in))
		if got != c.want {
			t.Errorf("%q: %s, want %s", c.in, got, c.want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%q: not JSON: %v", c.in, err)
		}
	}
}

func TestAppendFloatAndCompact(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 1: "1", 1.5: "1.5", 1e21: "1e+21", 0.000001: "0.000001"} {
		if got := string(AppendFloat(nil, f)); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
	if got := string(AppendCompact(nil, []byte(` { "a" : [1, 2] } `), "{", "{}")); got != `{"a":[1,2]}` {
		t.Errorf("compact: %s", got)
	}
	if got := string(AppendCompact(nil, []byte(`[1]`), "{", "{}")); got != `{}` {
		t.Errorf("wrong first byte: %s", got)
	}
	if got := string(AppendCompact(nil, []byte(`{bad`), "", "null")); got != `null` {
		t.Errorf("invalid: %s", got)
	}
}
