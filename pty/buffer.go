package pty

import (
	"sort"
	"unicode/utf8"
)

// buffer is a terminal's output as OpenCode keeps it: the last max bytes
// of text, with the absolute offset of its first byte, so a client that
// reconnects names the point it had reached and gets exactly what came
// after it.
//
// The text is kept in blocks that are never changed once written (the
// last one is only appended to, the first only cut from the front), so
// every client reads the one copy: read hands out slices of a block, not
// copies, and a client that is slow to send what it read holds a slice,
// never a scrollback of its own.
//
// Offsets (cursors) count UTF-16 code units, as OpenCode counts them (the
// length of the JavaScript strings it buffers) and as its web app counts
// what it received; for ASCII output that is the byte count. The text is
// kept as valid UTF-8: a sequence split across two reads waits for its
// end, and bytes that are not UTF-8 become U+FFFD, as OpenCode decodes
// the terminal's output.
type buffer struct {
	blocks  []block
	size    int   // bytes kept, over all blocks
	endByte int64 // absolute byte offset of the end
	endUnit int64 // absolute UTF-16 offset of the end
	max     int
	pending []byte // an incomplete UTF-8 sequence at the end of the last write
}

// blockSize is the capacity of one block (a block holds whole characters,
// so it may end up to 3 bytes short).
const blockSize = 64 << 10

// block is a run of the output: data is valid UTF-8 whose bytes are never
// changed once written.
type block struct {
	data       []byte
	byte, unit int64 // absolute offsets of data[0]
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
	for len(p) > 0 {
		n := len(b.blocks)
		if n == 0 || len(b.blocks[n-1].data) == cap(b.blocks[n-1].data) {
			b.blocks = append(b.blocks, block{data: make([]byte, 0, blockSize), byte: b.endByte, unit: b.endUnit})
			n++
		}
		last := &b.blocks[n-1]
		k := len(p)
		if room := cap(last.data) - len(last.data); k > room {
			k = room
			for k > 0 && !utf8.RuneStart(p[k]) {
				k--
			}
			if k == 0 { // not room for the next character: the block is full
				last.data = last.data[:len(last.data):len(last.data)]
				continue
			}
		}
		last.data = append(last.data, p[:k]...) // within its capacity: no byte read out is moved
		b.size += k
		b.endByte += int64(k)
		b.endUnit += units(p[:k])
		p = p[k:]
	}
	// Trim in batches (an eighth of max at a time), not on every write.
	if b.max <= 0 || b.size <= b.max+b.max/8 {
		return
	}
	d := b.size - b.max
	for len(b.blocks) > 0 && len(b.blocks[0].data) <= d {
		d -= len(b.blocks[0].data)
		b.size -= len(b.blocks[0].data)
		b.blocks[0] = block{} // a client may still hold a slice of it; the buffer does not
		b.blocks = b.blocks[1:]
	}
	if d > 0 && len(b.blocks) > 0 {
		first := &b.blocks[0]
		for d < len(first.data) && !utf8.RuneStart(first.data[d]) {
			d++
		}
		first.unit += units(first.data[:d])
		first.byte += int64(d)
		first.data = first.data[d:]
		b.size -= d
	}
}

// start is the position of the first byte kept.
func (b *buffer) start() position {
	if len(b.blocks) == 0 {
		return b.end()
	}
	return position{b.blocks[0].byte, b.blocks[0].unit}
}

// end is the position after the last byte.
func (b *buffer) end() position {
	return position{b.endByte, b.endUnit}
}

// drop forgets the output (an exited terminal's, once no client reads it).
func (b *buffer) drop() {
	b.blocks, b.size = nil, 0
}

// seek is the position of cursor, a UTF-16 offset: -1 is the end (no
// replay), an offset before what is kept is the start of what is kept,
// one past the end is the end. A cursor inside a surrogate pair (an
// astral character) starts after that character, with prefix U+FFFD in
// place of its second half, as OpenCode's string slice sends it.
func (b *buffer) seek(cursor int64) (pos position, prefix string) {
	end, start := b.end(), b.start()
	switch {
	case cursor < 0 || cursor >= end.unit:
		return end, ""
	case cursor <= start.unit:
		return start, ""
	}
	// The last block starting at or before cursor holds it.
	i := sort.Search(len(b.blocks), func(i int) bool { return b.blocks[i].unit > cursor }) - 1
	blk := b.blocks[i]
	u := blk.unit
	for j := 0; j < len(blk.data); {
		_, size := utf8.DecodeRune(blk.data[j:])
		w := int64(1)
		if size == 4 {
			w = 2
		}
		switch {
		case u == cursor:
			return position{blk.byte + int64(j), u}, ""
		case u+1 == cursor && w == 2:
			return position{blk.byte + int64(j+size), u + 2}, replacement
		}
		u += w
		j += size
	}
	return end, ""
}

// read returns up to max bytes of text from pos (whole characters, from
// one block), the position it starts at (later than pos if what pos names
// is no longer kept) and the position after it. The text is the buffer's
// own: shared with every reader, never to be changed.
func (b *buffer) read(pos position, max int) (text []byte, at, next position) {
	if start := b.start(); pos.byte < start.byte {
		pos = start
	}
	if pos.byte >= b.endByte {
		return nil, pos, pos
	}
	i := sort.Search(len(b.blocks), func(i int) bool { return b.blocks[i].byte > pos.byte }) - 1
	chunk := b.blocks[i].data[pos.byte-b.blocks[i].byte:]
	if j := len(chunk); max > 0 && j > max {
		j = max
		for j > 0 && !utf8.RuneStart(chunk[j]) {
			j--
		}
		if j == 0 { // max is shorter than one character
			_, j = utf8.DecodeRune(chunk)
		}
		chunk = chunk[:j]
	}
	chunk = chunk[:len(chunk):len(chunk)] // nothing appended to it reaches the block
	return chunk, pos, position{pos.byte + int64(len(chunk)), pos.unit + units(chunk)}
}
