package wire

// Prompt cases about the kinds of user input: file, directory, image, PDF
// and agent parts, a project command, an aborted turn and a failing tool
// call. The bodies are the ones the TUI sends (packages/opencode/src/cli/
// cmd/tui/component/prompt): the text part first, then the file and agent
// parts, each file mention as {type:"file", mime:"text/plain" (or
// "application/x-directory"), filename, url:"file://<abs>", source:{type:
// "file", path, text:{value:"@name", start, end}}}, a line selection as
// ?start=N&end=M on the URL and "#N-M" on the filename, a pasted image as a
// data: URL with source.text "[Image 1]". <DIR>, <ROOT> and <HOME> in a
// body become the case's paths when it is sent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

func init() {
	promptCases = append(promptCases, promptInputCases()...)
}

// inputProject is a git repository with a README, a 30-line file, a
// directory with a nested one, a 2500-line file past the read limits, a
// PDF and a project command; beside it (under the case's root, outside the
// project) outside/notes.txt.
func inputProject(t *testing.T, dir, _ string) string {
	var lines, big strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&lines, "line %d of lines.txt\n", i)
	}
	for i := 1; i <= 2500; i++ {
		if i == 5 {
			fmt.Fprintf(&big, "line %04d %s\n", i, strings.Repeat("x", 2500))
			continue
		}
		fmt.Fprintf(&big, "line %04d %s\n", i, strings.Repeat("abcdefghij", 4))
	}
	writeTree(t, dir, map[string]string{
		"AGENTS.md":       "Root rules: use tabs.\n",
		"README.md":       "# Demo\n\nA demo project for the prompt references.\n",
		"main.go":         "package main\n\nfunc main() {}\n",
		"lines.txt":       lines.String(),
		"src/a.go":        "package src\n\nfunc A() {}\n",
		"src/b.go":        "package src\n\nfunc B() {}\n",
		"src/nested/c.go": "package nested\n",
		"big.txt":         big.String(),
		"doc.pdf":         string(tinyPDF()),
		".opencode/command/recap.md": "---\ndescription: Recap the project with arguments\n---\n\n" +
			"Recap the project for: $ARGUMENTS\n\nThe readme: @README.md\n\nThe shell says: !`echo inline`\n",
	})
	writeTree(t, filepath.Dir(dir), map[string]string{"outside/notes.txt": "Notes kept outside the project.\n"})
	gitInit(t, dir)
	return dir
}

// tinyPNG is a 2x2 PNG.
func tinyPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	img.Set(1, 1, color.RGBA{0, 0, 255, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// tinyPDF is a one-page PDF that says "Hello PDF", with a correct xref.
func tinyPDF() []byte {
	stream := "BT /F1 24 Tf 72 720 Td (Hello PDF) Tj ET"
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	var offs []int
	for i, o := range objs {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// withModel sets fields of the stub model in the global config.
func withModel(fields map[string]any) func([]byte) []byte {
	return func(cfg []byte) []byte {
		var c map[string]any
		if err := json.Unmarshal(cfg, &c); err != nil {
			panic(err)
		}
		m := c["provider"].(map[string]any)["stub"].(map[string]any)["models"].(map[string]any)["stub-model"].(map[string]any)
		for k, v := range fields {
			m[k] = v
		}
		out, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			panic(err)
		}
		return append(out, '\n')
	}
}

// body is a v1 prompt body: a text part, then parts.
func body(text string, parts ...map[string]any) string {
	all := []any{map[string]any{"type": "text", "text": text}}
	for _, p := range parts {
		all = append(all, p)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"parts": all}); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// mention is the TUI's file part for "@value" at start in the text.
func mention(text, mime, filename, url, path string) map[string]any {
	value := "@" + filename
	start := strings.Index(text, value)
	if start < 0 {
		panic("no " + value + " in " + text)
	}
	return map[string]any{
		"type": "file", "mime": mime, "filename": filename, "url": url,
		"source": map[string]any{"type": "file", "text": map[string]any{"value": value, "start": start, "end": start + len(value)}, "path": path},
	}
}

// pasted is the TUI's part for a pasted image or PDF: a data: URL, the
// placeholder ("[Image 1]") as its source text.
func pasted(text, placeholder, mime, filename, path string, data []byte) map[string]any {
	start := strings.Index(text, placeholder)
	if start < 0 {
		panic("no " + placeholder + " in " + text)
	}
	return map[string]any{
		"type": "file", "mime": mime, "filename": filename,
		"url":    "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data),
		"source": map[string]any{"type": "file", "path": path, "text": map[string]any{"start": start, "end": start + len(placeholder), "value": placeholder}},
	}
}

// slowFirst streams the reply to a prompt that says "slow" in 4 pieces 2 s
// apart (the recorder aborts after the first); every other request,
// titles included, gets the echo at once.
func slowFirst(req stubmodel.Request) stubmodel.Response {
	resp := stubmodel.Echo(req)
	if !req.IsTitle() && strings.Contains(req.LastUserText(), "slow") {
		resp.Chunks, resp.Delay = 4, 2*time.Second
	}
	return resp
}

// waitStreamedText waits until some of the session's reply text has
// streamed: a message.part.delta event of its text on GET /event (the v1
// messages only show a text part once it is whole).
func waitStreamedText(t *testing.T, base, sessionDir, sessionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/event", nil)
	req.Header.Set("x-opencode-directory", url.PathEscape(sessionDir))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /event: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type       string `json:"type"`
			Properties struct {
				SessionID string `json:"sessionID"`
				Field     string `json:"field"`
				Delta     string `json:"delta"`
			} `json:"properties"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Type == "message.part.delta" && ev.Properties.SessionID == sessionID && ev.Properties.Field == "text" && ev.Properties.Delta != "" {
			t.Logf("streamed: %q", ev.Properties.Delta)
			return
		}
	}
	t.Fatalf("no streamed text in session %s: %v", sessionID, sc.Err())
}

func promptInputCases() []promptCase {
	const (
		readme  = "summarize @README.md"
		ranged  = "explain @lines.txt#10-20"
		dirText = "what is in @src/"
		outside = "check @<ROOT>/outside/notes.txt"
		large   = "summarize @big.txt"
		imgText = "[Image 1] what is in this image?"
		pdfText = "[PDF 1] what does this PDF say?"
		agent   = "ask @explore where main is defined"
	)
	img := pasted(imgText, "[Image 1]", "image/png", "clipboard", "clipboard", tinyPNG())
	withImage := withModel(map[string]any{"attachment": true, "modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}}})
	withPDF := withModel(map[string]any{"attachment": true, "modalities": map[string]any{"input": []string{"text", "image", "pdf"}, "output": []string{"text"}}})
	agentAt := strings.Index(agent, "@explore")
	return []promptCase{
		{
			Name:      "file-text",
			Setup:     inputProject,
			Prompts:   []string{body(readme, mention(readme, "text/plain", "README.md", "file://<DIR>/README.md", "README.md"))},
			NeedTitle: true,
		},
		{
			Name:      "file-range",
			Setup:     inputProject,
			Prompts:   []string{body(ranged, mention(ranged, "text/plain", "lines.txt#10-20", "file://<DIR>/lines.txt?start=10&end=20", "lines.txt"))},
			NeedTitle: true,
		},
		{
			Name:      "file-dir",
			Setup:     inputProject,
			Prompts:   []string{body(dirText, mention(dirText, "application/x-directory", "src/", "file://<DIR>/src", "src/"))},
			NeedTitle: true,
		},
		{
			// The mention's offsets are those of the text as written here,
			// with <ROOT> unexpanded.
			Name:      "file-outside",
			Setup:     inputProject,
			Prompts:   []string{body(outside, mention(outside, "text/plain", "<ROOT>/outside/notes.txt", "file://<ROOT>/outside/notes.txt", "<ROOT>/outside/notes.txt"))},
			NeedTitle: true,
		},
		{
			Name:      "file-large",
			Setup:     inputProject,
			Prompts:   []string{body(large, mention(large, "text/plain", "big.txt", "file://<DIR>/big.txt", "big.txt"))},
			NeedTitle: true,
		},
		{
			Name:      "image",
			Setup:     inputProject,
			Config:    withImage,
			Prompts:   []string{body(imgText, img)},
			NeedTitle: true,
		},
		{
			Name:      "image-text-only",
			Setup:     inputProject,
			Prompts:   []string{body(imgText, img)},
			NeedTitle: true,
		},
		{
			Name:      "pdf",
			Setup:     inputProject,
			Config:    withPDF,
			Prompts:   []string{body(pdfText, pasted(pdfText, "[PDF 1]", "application/pdf", "doc.pdf", "<DIR>/doc.pdf", tinyPDF()))},
			NeedTitle: true,
		},
		{
			Name:      "pdf-text-only",
			Setup:     inputProject,
			Prompts:   []string{body(pdfText, pasted(pdfText, "[PDF 1]", "application/pdf", "doc.pdf", "<DIR>/doc.pdf", tinyPDF()))},
			NeedTitle: true,
		},
		{
			Name:  "agent",
			Setup: inputProject,
			Prompts: []string{body(agent, map[string]any{"type": "agent", "name": "explore",
				"source": map[string]any{"value": "@explore", "start": agentAt, "end": agentAt + len("@explore")}})},
			NeedTitle: true,
		},
		{
			Name:      "command",
			Setup:     inputProject,
			Steps:     []promptStep{{Route: "command", Body: `{"command":"recap","arguments":"some args"}`}},
			NeedTitle: true,
		},
		{
			// prompt_async, abort once the first piece of the slow reply is
			// in, then a blocking prompt.
			Name:   "aborted",
			Setup:  inputProject,
			Script: slowFirst,
			Steps: []promptStep{
				{Route: "prompt_async", Body: body("first prompt, answer slow")},
				{Route: "abort", Body: "{}"},
				{Route: "message", Body: body("second prompt after the abort")},
			},
			NeedTitle: true,
		},
		{
			Name:      "tool-error",
			Setup:     inputProject,
			Script:    stubmodel.Directives,
			Prompts:   []string{body(`read it call:read {"filePath":"missing.txt"} then: after the error`)},
			NeedTitle: true,
		},
		{
			Name:      "two-prompts",
			Setup:     inputProject,
			Prompts:   []string{body("first plain prompt"), body("second plain prompt")},
			NeedTitle: true,
		},
	}
}
