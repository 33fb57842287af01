package lifecycle

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// needsResolving reports whether an input has parts that become model
// input only through what the server adds (a file's content, an agent's
// hint): a plain text prompt pays nothing for them.
func needsResolving(parts []opencode.Part) bool {
	for _, p := range parts {
		if p.Type == opencode.PartAgent {
			return true
		}
		if p.Type == opencode.PartFile && (strings.HasPrefix(p.URL, "file:") || resourceOf(p) != nil ||
			(p.Mime == "text/plain" && strings.HasPrefix(p.URL, "data:"))) {
			return true
		}
	}
	return false
}

// resourceSource is a file part's source when it names an MCP resource.
type resourceSource struct {
	Type       string `json:"type"`
	ClientName string `json:"clientName"`
	URI        string `json:"uri"`
}

// resourceOf is the MCP resource a file part names, if any.
func resourceOf(p opencode.Part) *resourceSource {
	if len(p.Source) == 0 || !bytes.Contains(p.Source, []byte(`"resource"`)) {
		return nil
	}
	var src resourceSource
	if json.Unmarshal(p.Source, &src) != nil || src.Type != "resource" {
		return nil
	}
	return &src
}

// ResourceContent is one piece of an MCP resource read: Text, or Blob
// (base64) of MimeType.
type ResourceContent struct {
	URI, MimeType, Text, Blob string
}

// mcpAttachable are the media types a binary MCP resource may be attached
// as (OpenCode's list), and maxResource its size limit.
var mcpAttachable = map[string]bool{"application/pdf": true, "image/gif": true, "image/jpeg": true, "image/png": true, "image/webp": true}

const maxResource = 10 << 20

// resolveResource is a file part naming an MCP resource as OpenCode 1.18.33
// stores it: what was read, each text as a synthetic text, each binary as a
// note and (if it is an image or PDF within the limit) a file part; the
// part itself is not kept.
func (m *Manager) resolveResource(ctx context.Context, p opencode.Part, src *resourceSource, synthetic func(string) opencode.Part) []opencode.Part {
	out := []opencode.Part{synthetic(fmt.Sprintf("Reading MCP resource: %s (%s)", p.Filename, src.URI))}
	var contents []ResourceContent
	err := errors.New("no MCP servers")
	if m.cfg.ReadResource != nil {
		contents, err = m.cfg.ReadResource(ctx, src.ClientName, src.URI)
	}
	if err != nil {
		return append(out, synthetic(fmt.Sprintf("Failed to read MCP resource %s: %s", p.Filename, err)))
	}
	for _, c := range contents {
		switch {
		case c.Text != "":
			out = append(out, synthetic(c.Text))
		case c.Blob != "":
			mime := c.MimeType
			if mime == "" {
				mime = p.Mime
			}
			name := c.URI
			if name == "" {
				name = p.Filename
			}
			if name == "" {
				name = src.URI
			}
			size := decodedSize(c.Blob)
			switch {
			case !mcpAttachable[mime]:
				out = append(out, synthetic(fmt.Sprintf("[Binary MCP resource omitted: %s (%s, %s) is not a supported attachment type]", name, mime, byteSize(size))))
			case size > maxResource:
				out = append(out, synthetic(fmt.Sprintf("[Binary MCP resource omitted: %s (%s, %s) exceeds %s]", name, mime, byteSize(size), byteSize(maxResource))))
			default:
				out = append(out, synthetic(fmt.Sprintf("[Binary MCP resource attached: %s (%s)]", name, mime)),
					opencode.Part{ID: m.ids.NewPart(), Type: opencode.PartFile, Mime: mime, Filename: name,
						URL: "data:" + mime + ";base64," + c.Blob})
			}
		}
	}
	return out
}

// decodedSize is the size of base64 data once decoded.
func decodedSize(b64 string) int {
	b64 = strings.Join(strings.Fields(b64), "")
	n := len(b64) * 3 / 4
	if strings.HasSuffix(b64, "==") {
		n -= 2
	} else if strings.HasSuffix(b64, "=") {
		n--
	}
	return n
}

// byteSize formats a size as OpenCode does (B, KB, MB, rounded up).
func byteSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", (n+1023)/1024)
	}
	return fmt.Sprintf("%d MB", (n+(1<<20)-1)>>20)
}

// resolveParts turns an input's parts into the user message's parts as
// OpenCode's createUserMessage stores them (session/prompt.ts): a text file
// gains the synthetic texts of a Read call and its output, a directory its
// listing, a binary file on disk becomes a data: URL, an agent mention the
// hint to call the task tool. It runs before admission, off the session's
// runner (it reads files); dir is the session's directory and denied
// reports whether the agent's rules deny a subagent. The synthetic parts
// are stored, so every view and a restart show what the model was sent.
func (m *Manager) resolveParts(ctx context.Context, parts []opencode.Part, dir string, denied func(agent string) bool) []opencode.Part {
	out := make([]opencode.Part, 0, len(parts)+2)
	synthetic := func(text string) opencode.Part {
		return opencode.Part{ID: m.ids.NewPart(), Type: opencode.PartText, Text: text, Synthetic: true}
	}
	for _, p := range parts {
		switch {
		case p.Type == opencode.PartAgent:
			hint := ""
			if denied != nil && denied(p.Name) {
				hint = " . Invoked by user; guaranteed to exist."
			}
			out = append(out, p, synthetic(" Use the above message and context to generate a prompt and call the task tool with subagent: "+p.Name+hint))
		case p.Type == opencode.PartFile && resourceOf(p) != nil:
			out = append(out, m.resolveResource(ctx, p, resourceOf(p), synthetic)...)
		case p.Type == opencode.PartFile && p.Mime == "text/plain" && strings.HasPrefix(p.URL, "data:"):
			// A text given inline: a Read call of its name, and the text.
			out = append(out, synthetic(readCall{FilePath: p.Filename}.text()), synthetic(decodeDataURL(p.URL)), p)
		case p.Type == opencode.PartFile && strings.HasPrefix(p.URL, "file:"):
			out = append(out, m.resolveFile(ctx, p, dir, synthetic)...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// readCall is the read tool's input as OpenCode writes it in the synthetic
// "Called the Read tool" text (JSON.stringify: unset fields left out).
type readCall struct {
	FilePath string `json:"filePath"`
	Offset   *int   `json:"offset,omitempty"`
	Limit    *int   `json:"limit,omitempty"`
}

func (c readCall) text() string {
	// As JSON.stringify writes it: &, < and > as they are.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c)
	return "Called the Read tool with the following input: " + strings.TrimSuffix(b.String(), "\n")
}

// resolveFile is one file:// part as OpenCode stores it.
func (m *Manager) resolveFile(ctx context.Context, p opencode.Part, dir string, synthetic func(string) opencode.Part) []opencode.Part {
	u, err := url.Parse(p.URL)
	if err != nil {
		return []opencode.Part{p}
	}
	path := u.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	path = filepath.Clean(path)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p.Mime = "application/x-directory" // whatever the client called it
	}
	switch p.Mime {
	case "text/plain":
		call := readCall{FilePath: path}
		if s := u.Query().Get("start"); s != "" {
			// The TUI's line selection: file://…?start=N&end=M.
			if start, err := strconv.Atoi(s); err == nil {
				off := max(start, 1)
				call.Offset = &off
				if e, err := strconv.Atoi(u.Query().Get("end")); err == nil && e != 0 {
					lim := e - (off - 1)
					call.Limit = &lim
				}
			}
		}
		out := []opencode.Part{synthetic(call.text())}
		if mime := sniffMedia(path); mime != "" {
			// The read tool returns images and PDFs as attachments, which
			// replace the file part.
			b, err := readLimited(path, maxAttachment)
			if err != nil {
				return append(out, synthetic(fmt.Sprintf("Read tool failed to read %s with the following error: %s", path, err)))
			}
			msg := "Image read successfully"
			if mime == "application/pdf" {
				msg = "PDF read successfully"
			}
			att := opencode.Part{ID: m.ids.NewPart(), Type: opencode.PartFile, Mime: mime, Filename: p.Filename, Synthetic: true,
				URL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)}
			return append(out, synthetic(msg), att)
		}
		res, err := m.userRead(ctx, call)
		if err != nil {
			return append(out, synthetic(fmt.Sprintf("Read tool failed to read %s with the following error: %s", path, err)))
		}
		return append(out, synthetic(res), p)
	case "application/x-directory":
		call := readCall{FilePath: path}
		res, err := m.userRead(ctx, call)
		if err != nil {
			// OpenCode stores only the failure here.
			return []opencode.Part{synthetic(fmt.Sprintf("Read tool failed to read %s with the following error: %s", path, err))}
		}
		return []opencode.Part{synthetic(call.text()), synthetic(res), p}
	}
	// A binary file (an image, a PDF): its bytes go to the model as a
	// data: URL.
	// The path as it is, not JSON-escaped: OpenCode writes this one by hand.
	out := []opencode.Part{synthetic(`Called the Read tool with the following input: {"filePath":"` + path + `"}`)}
	b, err := readLimited(path, maxAttachment)
	if err != nil {
		return append(out, synthetic(fmt.Sprintf("Read tool failed to read %s with the following error: %s", path, err)))
	}
	f := p
	f.URL = "data:" + p.Mime + ";base64," + base64.StdEncoding.EncodeToString(b)
	return append(out, f)
}

// maxAttachment bounds a binary file read into a prompt.
const maxAttachment = 50 << 20

func readLimited(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("File not found: %s", path)
		}
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d MB", path, limit>>20)
	}
	return os.ReadFile(path)
}

// userRead runs the read tool for a file the user attached: the user chose
// it, so it is read wherever it is (the tool is rooted at its directory).
func (m *Manager) userRead(ctx context.Context, call readCall) (string, error) {
	input, _ := json.Marshal(call)
	root := filepath.Dir(call.FilePath)
	if fi, err := os.Stat(call.FilePath); err == nil && fi.IsDir() {
		root = call.FilePath
	}
	res, err := tool.Read{}.Run(ctx, tool.Call{Dir: root, Input: input})
	if err != nil {
		return "", err
	}
	return res.Output, nil
}

// sniffMedia is the type of an image or PDF file (the read tool's
// SniffMedia), or "".
func sniffMedia(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	return tool.SniffMedia(f, path)
}

// decodeDataURL is a data: URL's content as text (base64 or percent-encoded).
func decodeDataURL(u string) string {
	head, data, ok := strings.Cut(u, ",")
	if !ok {
		return ""
	}
	if strings.Contains(head, ";base64") {
		b, _ := base64.StdEncoding.DecodeString(data)
		return string(b)
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return data
	}
	return s
}
