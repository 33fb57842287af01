package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// readMaxAttachment bounds an image or PDF the read tool returns.
	readMaxAttachment = 20 << 20
	readDefaultLimit  = 2000
	readMaxLineLen    = 2000
	readMaxBytes      = 50 * 1024
)

// Read reads a text file with line numbers.
type Read struct{}

type readInput struct {
	FilePath string `json:"filePath"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
}

func (Read) Name() string { return "read" }

func (Read) Description() string {
	return `Reads a file from the session directory.

Usage:
- filePath may be absolute (inside the session directory) or relative to it.
- By default up to 2000 lines are returned from the start of the file; use offset (1-indexed line number) and limit to read other parts.
- Lines longer than 2000 characters are truncated; output is capped at 50 KB.
- Each line is prefixed with its line number ("12: text").
- A directory is listed: its entries, one a line, directories ending in "/".
- Binary files cannot be read.`
}

func (Read) Parameters() json.RawMessage {
	return schema([]string{"filePath"},
		str("filePath", "The path to the file to read"),
		num("offset", "The line number to start reading from (1-indexed)"),
		num("limit", "The maximum number of lines to read (defaults to 2000)"),
	)
}

func (t Read) input(c Call) (readInput, string, string, error) {
	var in readInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, "", "", err
	}
	if in.FilePath == "" {
		return in, "", "", errors.New("filePath is required")
	}
	abs, rel, err := resolve(c.Dir, in.FilePath)
	return in, abs, rel, err
}

func (t Read) Permission(c Call) (string, []string, error) {
	_, _, rel, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "read", []string{rel}, nil
}

func (t Read) Run(ctx context.Context, c Call) (Result, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	return t.run(ctx, c, in, abs, rel)
}

// run reads the file resolve named (abs, rel) through a root on c.Dir.
func (t Read) run(ctx context.Context, c Call, in readInput, abs, rel string) (Result, error) {
	offset, limit := 1, readDefaultLimit
	if in.Offset != nil {
		if *in.Offset < 0 {
			return Result{}, errors.New("offset must be greater than or equal to 1")
		}
		if *in.Offset > 0 {
			offset = *in.Offset
		}
	}
	if in.Limit != nil {
		if *in.Limit < 0 {
			return Result{}, errors.New("limit must not be negative")
		}
		if *in.Limit > 0 {
			limit = *in.Limit
		}
	}

	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	name := s.name(rel)
	fi, err := s.root.Stat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Result{}, notFound(s, rel, abs)
		}
		return Result{}, s.fail(in.FilePath, err)
	}
	if fi.IsDir() {
		return t.list(s, name, abs, rel, offset, limit)
	}
	if !fi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("%s is not a regular file", rel)
	}
	f, err := s.root.Open(name)
	if err != nil {
		return Result{}, s.fail(in.FilePath, err)
	}
	defer f.Close()
	// What was opened is what is read: check it again on the descriptor.
	if fi, err = f.Stat(); err != nil {
		return Result{}, err
	}
	if !fi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("%s is not a regular file", rel)
	}
	if mime := SniffMedia(f, abs); mime != "" {
		// Images and PDFs go back as an attachment, as OpenCode's read
		// tool returns them.
		b, err := io.ReadAll(io.LimitReader(f, readMaxAttachment+1))
		if err != nil {
			return Result{}, err
		}
		if len(b) > readMaxAttachment {
			return Result{}, fmt.Errorf("%s is larger than %d MB", abs, readMaxAttachment>>20)
		}
		msg := "Image read successfully"
		if mime == "application/pdf" {
			msg = "PDF read successfully"
		}
		return Result{Title: rel, Output: msg, Metadata: map[string]any{"preview": msg, "truncated": false},
			Attachments: []Attachment{{Mime: mime, URL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)}}}, nil
	}
	bin, err := isBinaryFile(abs, f)
	if err != nil {
		return Result{}, err
	}
	if bin {
		return Result{}, fmt.Errorf("Cannot read binary file: %s", abs)
	}

	var (
		out       strings.Builder
		preview   []string
		count     int // lines seen
		shown     int
		bytesOut  int
		cut, more bool
	)
	br := bufio.NewReaderSize(f, 64*1024)
	for {
		if count%4096 == 0 && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		line, eof, err := readLine(br, readMaxLineLen*4)
		if err != nil {
			return Result{}, err
		}
		if eof && line == nil {
			break
		}
		count++
		if count < offset {
			if eof {
				break
			}
			continue
		}
		if shown >= limit {
			// Counted to the end, as OpenCode does: the note gives the total.
			more = true
			if eof {
				break
			}
			continue
		}
		text := strings.TrimSuffix(string(line), "\r")
		text = truncateRunes(text, readMaxLineLen, fmt.Sprintf("... (line truncated to %d chars)", readMaxLineLen))
		// The cap counts the lines' text and their separators, not the
		// line numbers (as OpenCode counts it).
		size := len(text)
		if shown > 0 {
			size++
		}
		if bytesOut+size > readMaxBytes {
			cut, more = true, true
			break
		}
		if shown > 0 {
			out.WriteByte('\n')
		}
		fmt.Fprintf(&out, "%d: %s", count, text)
		bytesOut += size
		if shown < 20 {
			preview = append(preview, text)
		}
		shown++
		if eof {
			break
		}
	}
	if count < offset && !(count == 0 && offset == 1) {
		return Result{}, fmt.Errorf("Offset %d is out of range for this file (%d lines)", offset, count)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "<path>%s</path>\n<type>file</type>\n<content>\n", abs)
	b.WriteString(out.String())
	last := offset + shown - 1
	switch {
	case cut:
		fmt.Fprintf(&b, "\n\n(Output capped at %d KB. Showing lines %d-%d. Use offset=%d to continue.)", readMaxBytes/1024, offset, last, last+1)
	case more:
		fmt.Fprintf(&b, "\n\n(Showing lines %d-%d of %d. Use offset=%d to continue.)", offset, last, count, last+1)
	default:
		fmt.Fprintf(&b, "\n\n(End of file - total %d lines)", count)
	}
	b.WriteString("\n</content>")
	return Result{
		Title:  rel,
		Output: b.String(),
		Metadata: map[string]any{
			"preview":   strings.Join(preview, "\n"),
			"truncated": more,
		},
	}, nil
}

// readLine reads one line without its "\n", keeping at most max bytes of it
// (the rest is discarded). eof is true when the input ended; line is nil
// then if nothing was read.
func readLine(br *bufio.Reader, max int) (line []byte, eof bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) < max {
			room := max - len(line)
			c := chunk
			if len(c) > room {
				c = c[:room]
			}
			line = append(line, c...)
		} else if line == nil {
			line = []byte{}
		}
		switch {
		case err == nil:
			return trimNL(line, chunk), false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) == 0 {
				return nil, true, nil
			}
			return line, true, nil
		default:
			return nil, false, err
		}
	}
}

// trimNL drops the trailing newline if the last chunk ended with one and it
// was kept.
func trimNL(line, chunk []byte) []byte {
	if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' && len(line) > 0 && line[len(line)-1] == '\n' {
		return line[:len(line)-1]
	}
	return line
}

// notFound builds OpenCode's "File not found" error with suggestions from
// the entries of rel's parent directory, listed through the root; paths are
// absolute, as OpenCode words them.
func notFound(s *scope, rel, abs string) error {
	dir, base := path.Dir(rel), strings.ToLower(path.Base(rel))
	entries, _ := fs.ReadDir(s.fs(), dir)
	var sugg []string
	for _, e := range entries {
		n := strings.ToLower(e.Name())
		if strings.Contains(n, base) || strings.Contains(base, n) {
			sugg = append(sugg, filepath.Join(filepath.Dir(abs), e.Name()))
			if len(sugg) == 3 {
				break
			}
		}
	}
	if len(sugg) > 0 {
		return fmt.Errorf("File not found: %s\n\nDid you mean one of these?\n%s", abs, strings.Join(sugg, "\n"))
	}
	return fmt.Errorf("File not found: %s", abs)
}

// list is the read tool on a directory, as OpenCode's: its entries sorted
// by name, directories (and links to them) with a trailing "/", a window of
// limit entries from offset.
func (Read) list(s *scope, name, abs, rel string, offset, limit int) (Result, error) {
	entries, err := fs.ReadDir(s.fs(), filepath.ToSlash(name))
	if err != nil {
		return Result{}, s.fail(abs, err)
	}
	items := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		switch {
		case e.IsDir():
			n += "/"
		case e.Type()&fs.ModeSymlink != 0:
			if fi, err := s.root.Stat(filepath.Join(name, n)); err == nil && fi.IsDir() {
				n += "/"
			}
		}
		items = append(items, n)
	}
	slices.SortFunc(items, localeCompare)
	start := min(offset-1, len(items))
	sliced := items[start:min(start+limit, len(items))]
	truncated := start+len(sliced) < len(items)
	tail := fmt.Sprintf("\n(%d entries)", len(items))
	if truncated {
		tail = fmt.Sprintf("\n(Showing %d of %d entries. Use 'offset' parameter to read beyond entry %d)", len(sliced), len(items), offset+len(sliced))
	}
	out := strings.Join([]string{"<path>" + abs + "</path>", "<type>directory</type>", "<entries>",
		strings.Join(sliced, "\n"), tail, "</entries>"}, "\n")
	return Result{Title: rel, Output: out, Metadata: map[string]any{
		"preview": strings.Join(sliced[:min(20, len(sliced))], "\n"), "truncated": truncated}}, nil
}

// collation is the order of ASCII punctuation in ICU's root collation, which
// JavaScript's localeCompare uses: punctuation and symbols before digits,
// digits before letters.
const collation = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789"

// localeCompare orders names as OpenCode's read tool sorts a directory
// (String.prototype.localeCompare): letters case-insensitively after
// punctuation and digits, and on a tie lowercase first.
func localeCompare(a, b string) int {
	key := func(r rune) int {
		if i := strings.IndexRune(collation, r); i >= 0 {
			return i
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return len(collation) + int(r)
	}
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ka, kb := key(ra[i]), key(rb[i]); ka != kb {
			return ka - kb
		}
	}
	if len(ra) != len(rb) {
		return len(ra) - len(rb)
	}
	// Same letters: lowercase sorts first.
	return -strings.Compare(a, b)
}

// SniffMedia is the type of an image or PDF by its first bytes (falling
// back to its extension), as OpenCode's read tool finds it: PNG, JPEG, GIF,
// WebP and PDF are returned as attachments. f is read from the start and
// left there.
func SniffMedia(f io.ReadSeeker, name string) string {
	var b [16]byte
	n, _ := io.ReadFull(f, b[:])
	_, _ = f.Seek(0, io.SeekStart)
	h := b[:n]
	switch {
	case bytes.HasPrefix(h, []byte{137, 80, 78, 71, 13, 10, 26, 10}):
		return "image/png"
	case bytes.HasPrefix(h, []byte{255, 216, 255}):
		return "image/jpeg"
	case bytes.HasPrefix(h, []byte("GIF8")):
		return "image/gif"
	case len(h) >= 12 && bytes.Equal(h[:4], []byte("RIFF")) && bytes.Equal(h[8:12], []byte("WEBP")):
		return "image/webp"
	case bytes.HasPrefix(h, []byte("%PDF-")):
		return "application/pdf"
	case bytes.HasPrefix(h, []byte("BM")):
		return "" // bmp: not an attachment type
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".pdf":
		return "application/pdf"
	}
	return ""
}
