package pty

import "unicode/utf8"

// buffer is a terminal's output as OpenCode keeps it: the last max bytes
// of text, with the absolute offset of its first byte, so a client that
// reconnects names the point it had reached and gets exactly what came
// after it.
//
// Offsets (cursors) count UTF-16 code units, as OpenCode counts them (the
// length of the JavaScript strings it buffers) and as its web app counts
// what it received; for ASCII output that is the byte count. The text is
// kept as valid UTF-8: a sequence split across two reads waits for its
// end, and bytes that are not UTF-8 become U+FFFD, as OpenCode decodes
// the terminal's output.
type buffer struct {
	data      []byte // valid UTF-8
	startByte int64  // absolute byte offset of data[0]
	startUnit int64  // absolute UTF-16 offset of data[0]
	endUnit   int64  // absolute UTF-16 offset of the end of data
	max       int
	pending   []byte // an incomplete UTF-8 sequence at the end of the last write
}

// position is a point in the output: its absolute byte and UTF-16 offsets.
type position struct{ byte, unit int64 }

const replacement = "\uFFFD"

// units is the UTF-16 length of valid UTF-8 text.
func units(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
		}
		if c >= 0xF0 {
			n++ // a 4-byte sequence is a surrogate pair
		}
	}
	return n
}

// write appends output as it came from the terminal.
func (b *buffer) write(p []byte) {
	if len(b.pending) > 0 {
		p = append(b.pending, p...)
		b.pending = nil
	}
	// Hold back an incomplete sequence at the end for the next write.
	if cut := incompleteTail(p); cut < len(p) {
		b.pending = append([]byte(nil), p[cut:]...)
		p = p[:cut]
	}
	if utf8.Valid(p) {
		b.append(p)
		return
	}
	out := make([]byte, 0, len(p)+8)
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 {
			out = append(out, replacement...)
		} else {
			out = append(out, p[:size]...)
		}
		p = p[size:]
	}
	b.append(out)
}

// incompleteTail is where an incomplete but so far valid UTF-8 sequence
// at the end of p starts (len(p) if there is none).
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if !utf8.RuneStart(p[i]) {
			continue
		}
		if !utf8.FullRune(p[i:]) {
			return i
		}
		break
	}
	return len(p)
}

// flush ends the output: a sequence still incomplete is U+FFFD.
func (b *buffer) flush() {
	if len(b.pending) > 0 {
		b.pending = nil
		b.append([]byte(replacement))
	}
}

func (b *buffer) append(p []byte) {
	if len(p) == 0 {
		return
	}
	b.data = append(b.data, p...)
	b.endUnit += units(p)
	// Trim in batches (an eighth of max at a time), not on every write.
	if b.max > 0 && len(b.data) > b.max+b.max/8 {
		d := len(b.data) - b.max
		for d < len(b.data) && !utf8.RuneStart(b.data[d]) {
			d++
		}
		b.startUnit += units(b.data[:d])
		b.startByte += int64(d)
		b.data = append(b.data[:0], b.data[d:]...)
	}
}

// end is the position after the last byte.
func (b *buffer) end() position {
	return position{b.startByte + int64(len(b.data)), b.endUnit}
}

// seek is the position of cursor, a UTF-16 offset: -1 is the end (no
// replay), an offset before what is kept is the start of what is kept,
// one past the end is the end. A cursor inside a surrogate pair (an
// astral character) starts after that character, with prefix U+FFFD in
// place of its second half, as OpenCode's string slice sends it.
func (b *buffer) seek(cursor int64) (pos position, prefix string) {
	end := b.end()
	switch {
	case cursor < 0 || cursor >= end.unit:
		return end, ""
	case cursor <= b.startUnit:
		return position{b.startByte, b.startUnit}, ""
	}
	u := b.startUnit
	for i := 0; i < len(b.data); {
		_, size := utf8.DecodeRune(b.data[i:])
		w := int64(1)
		if size == 4 {
			w = 2
		}
		switch {
		case u == cursor:
			return position{b.startByte + int64(i), u}, ""
		case u+1 == cursor && w == 2:
			return position{b.startByte + int64(i+size), u + 2}, replacement
		}
		u += w
		i += size
	}
	return end, ""
}

// read returns up to max bytes of text from pos (whole characters), the
// position it starts at (later than pos if what pos names is no longer
// kept) and the position after it.
func (b *buffer) read(pos position, max int) (text string, at, next position) {
	if pos.byte < b.startByte {
		pos = position{b.startByte, b.startUnit}
	}
	i := int(pos.byte - b.startByte)
	if i >= len(b.data) {
		return "", pos, pos
	}
	j := len(b.data)
	if max > 0 && j-i > max {
		j = i + max
		for j > i && !utf8.RuneStart(b.data[j]) {
			j--
		}
		if j == i { // max is shorter than one character
			_, size := utf8.DecodeRune(b.data[i:])
			j = i + size
		}
	}
	chunk := b.data[i:j]
	return string(chunk), pos, position{pos.byte + int64(len(chunk)), pos.unit + units(chunk)}
}
