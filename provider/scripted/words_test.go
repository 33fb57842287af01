package scripted

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestWords: words counts what strings.Fields returns, for any string
// (invalid UTF-8 and Unicode spaces included).
func TestWords(t *testing.T) {
	for _, s := range []string{"", " ", "a", " a b  c ", "a\u00a0b", "\xff \xfe", "x\u2028y\tz\n"} {
		if got, want := words(s), len(strings.Fields(s)); got != want {
			t.Errorf("words(%q) = %d, want %d", s, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOf(rapid.OneOf(rapid.RuneFrom([]rune(" \t\n\u00a0\u2028\u3000ab\ufffd")), rapid.Rune())).Draw(t, "s")
		if got, want := words(s), len(strings.Fields(s)); got != want {
			t.Fatalf("words(%q) = %d, want %d", s, got, want)
		}
	})
}
