package pty

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func u16(s string) int64 { return int64(len(utf16.Encode([]rune(s)))) }

// all reads everything from pos.
func all(b *buffer, pos position) string {
	var out []byte
	for {
		text, _, next := b.read(pos, 0)
		if len(text) == 0 {
			return string(out)
		}
		out, pos = append(out, text...), next
	}
}

// kept is everything the buffer keeps.
func (b *buffer) kept() string { return all(b, b.start()) }

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
	kept := b.kept()
	if len(kept) > 64+64/8 || b.size != len(kept) {
		t.Fatalf("kept %d bytes (size %d), max 64 (+1/8)", len(kept), b.size)
	}
	start := b.start()
	if !strings.HasSuffix(w, kept) || start.unit != u16(w)-u16(kept) || start.byte != int64(len(w)-len(kept)) {
		t.Fatalf("kept %q at %v: not the tail of the output", kept, start)
	}
	pos, prefix := b.seek(3)
	if got := prefix + all(&b, pos); got != kept {
		t.Errorf("cursor before what is kept: %q, want all kept %q", got, kept)
	}
	text, at, _ := b.read(position{}, 0)
	if at.unit != start.unit || string(text) != kept {
		t.Errorf("a reader at 0 continues at %d with %q", at.unit, text)
	}
	// Every cursor inside what is kept replays exactly the rest.
	for c := start.unit; c <= b.endUnit; c++ {
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
		if len(text) == 0 {
			break
		}
		if at != pos || len(text) > 5 || !strings.HasPrefix(string(text), "😀") {
			t.Fatalf("chunk %q at %v from %v", text, at, pos)
		}
		if next.unit-at.unit != u16(string(text)) {
			t.Fatalf("chunk %q advanced %d units", text, next.unit-at.unit)
		}
		got.Write(text)
		pos = next
	}
	if got.String() != strings.Repeat("😀", 10) {
		t.Errorf("chunks %q", got.String())
	}
}

// TestBufferBlocks: output longer than a block is kept in blocks of whole
// characters; every cursor replays exactly the rest, across the blocks'
// seams, and what two readers read is the buffer's one copy, not one each.
func TestBufferBlocks(t *testing.T) {
	b := buffer{max: 3 * blockSize}
	var whole strings.Builder
	for i := 0; whole.Len() < 5*blockSize; i++ {
		s := strings.Repeat("é😀x", i%7) + "\n" // 2-, 4- and 1-byte characters across the seams
		whole.WriteString(s)
		b.write([]byte(s))
	}
	w := whole.String()
	kept := b.kept()
	if !strings.HasSuffix(w, kept) || len(kept) < 3*blockSize || len(b.blocks) < 3 || b.endUnit != u16(w) {
		t.Fatalf("kept %d bytes in %d blocks, endUnit %d (want the tail of %d bytes, %d units)", len(kept), len(b.blocks), b.endUnit, len(w), u16(w))
	}
	for i, blk := range b.blocks {
		if !utf8.Valid(blk.data) || len(blk.data) > blockSize || (i > 0 && blk.byte != b.blocks[i-1].byte+int64(len(b.blocks[i-1].data))) {
			t.Fatalf("block %d: %d bytes at %d, valid %v", i, len(blk.data), blk.byte, utf8.Valid(blk.data))
		}
	}
	start := b.start()
	for _, c := range []int64{start.unit, start.unit + 1, b.blocks[1].unit - 1, b.blocks[1].unit, b.blocks[1].unit + 1, b.endUnit - 1} {
		pos, prefix := b.seek(c)
		if got := prefix + all(&b, pos); u16(got) != b.endUnit-c {
			t.Errorf("cursor %d: %d units replayed, want %d", c, u16(got), b.endUnit-c)
		}
	}
	one, _, _ := b.read(start, blockSize)
	two, _, _ := b.read(start, blockSize)
	if len(one) == 0 || &one[0] != &two[0] || &one[0] != &b.blocks[0].data[0] {
		t.Error("two readers got copies of the buffer, not the buffer")
	}
	if one = append(one, '!'); &one[0] == &b.blocks[0].data[0] {
		t.Error("appending to what was read wrote into the buffer")
	}
}
