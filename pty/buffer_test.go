package pty

import (
	"strings"
	"testing"
	"unicode/utf16"
)

func u16(s string) int64 { return int64(len(utf16.Encode([]rune(s)))) }

// all reads everything from pos.
func all(b *buffer, pos position) string {
	text, _, _ := b.read(pos, 0)
	return text
}

func TestBufferUTF16Cursor(t *testing.T) {
	var b buffer
	b.write([]byte("a\xc3\xa9\xf0\x9f\x98\x80z")) // a é 😀 z: 1+1+2+1 units
	if b.endUnit != 5 {
		t.Fatalf("endUnit = %d, want 5", b.endUnit)
	}
	for _, c := range []struct {
		cursor int64
		want   string
	}{
		{0, "aé😀z"}, {1, "é😀z"}, {2, "😀z"}, {3, "\uFFFDz"}, {4, "z"}, {5, ""}, {6, ""}, {-1, ""},
	} {
		pos, prefix := b.seek(c.cursor)
		if got := prefix + all(&b, pos); got != c.want {
			t.Errorf("cursor %d: %q, want %q", c.cursor, got, c.want)
		}
	}
}

func TestBufferSplitAndInvalidUTF8(t *testing.T) {
	var b buffer
	b.write([]byte("x\xf0\x9f"))
	if got := all(&b, position{}); got != "x" {
		t.Fatalf("an incomplete sequence was kept as %q", got)
	}
	b.write([]byte("\x98\x80\xffy"))
	if got := all(&b, position{}); got != "x😀\uFFFDy" {
		t.Errorf("got %q, want x😀\\uFFFDy", got)
	}
	b.write([]byte("\xe2\x82"))
	b.flush()
	if got := all(&b, position{}); !strings.HasSuffix(got, "y\uFFFD") || b.endUnit != u16(got) {
		t.Errorf("after flush %q (endUnit %d)", got, b.endUnit)
	}
}

// TestBufferTrim: what is kept is the last max bytes (whole characters);
// offsets stay absolute, a cursor before what is kept replays all of it,
// and a reader that fell behind continues at the start of what is kept.
func TestBufferTrim(t *testing.T) {
	b := buffer{max: 64}
	var whole strings.Builder
	for i := range 100 {
		s := strings.Repeat("é", i%5) + "line😀\n"
		whole.WriteString(s)
		b.write([]byte(s))
	}
	w := whole.String()
	if b.endUnit != u16(w) {
		t.Fatalf("endUnit %d, want %d", b.endUnit, u16(w))
	}
	if len(b.data) > 64+64/8 {
		t.Fatalf("kept %d bytes, max 64 (+1/8)", len(b.data))
	}
	kept := string(b.data)
	if !strings.HasSuffix(w, kept) || b.startUnit != u16(w)-u16(kept) || b.startByte != int64(len(w)-len(kept)) {
		t.Fatalf("kept %q at %d/%d: not the tail of the output", kept, b.startByte, b.startUnit)
	}
	pos, prefix := b.seek(3)
	if got := prefix + all(&b, pos); got != kept {
		t.Errorf("cursor before what is kept: %q, want all kept %q", got, kept)
	}
	text, at, _ := b.read(position{}, 0)
	if at.unit != b.startUnit || text != kept {
		t.Errorf("a reader at 0 continues at %d with %q", at.unit, text)
	}
	// Every cursor inside what is kept replays exactly the rest.
	for c := b.startUnit; c <= b.endUnit; c++ {
		pos, prefix := b.seek(c)
		got := prefix + all(&b, pos)
		if u16(got) != b.endUnit-c {
			t.Errorf("cursor %d: %d units replayed, want %d", c, u16(got), b.endUnit-c)
		}
	}
}

func TestBufferReadChunks(t *testing.T) {
	var b buffer
	b.write([]byte(strings.Repeat("😀", 10)))
	pos := position{}
	var got strings.Builder
	for {
		text, at, next := b.read(pos, 5) // not a multiple of 4
		if text == "" {
			break
		}
		if at != pos || len(text) > 5 || !strings.HasPrefix(text, "😀") {
			t.Fatalf("chunk %q at %v from %v", text, at, pos)
		}
		if next.unit-at.unit != u16(text) {
			t.Fatalf("chunk %q advanced %d units", text, next.unit-at.unit)
		}
		got.WriteString(text)
		pos = next
	}
	if got.String() != strings.Repeat("😀", 10) {
		t.Errorf("chunks %q", got.String())
	}
}
