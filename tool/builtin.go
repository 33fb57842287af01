package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/opencode-server/opencode-server/agent"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Builtin returns fresh instances of the built-in tools, named as OpenCode
// names them: bash, read, glob, grep, edit, write, todowrite, webfetch,
// question, task, apply_patch (which the model is offered instead of edit
// and write when it is a GPT model, as OpenCode does; see lifecycle).
func Builtin() []Tool {
	return []Tool{
		Bash{},
		Read{},
		Glob{},
		Grep{},
		Edit{},
		Write{},
		TodoWrite{},
		WebFetch{},
		Question{},
		Task{Subagents: subagents()},
		ApplyPatch{},
	}
}

// subagents are the built-in agents the task tool can start.
func subagents() []Subagent {
	var out []Subagent
	for _, a := range agent.Builtin {
		if a.Mode == "subagent" {
			out = append(out, Subagent{Name: a.Name, Description: a.Description})
		}
	}
	return out
}

// Lookup returns the tool called name, or nil.
func Lookup(tools []Tool, name string) Tool {
	for _, t := range tools {
		if t != nil && t.Name() == name {
			return t
		}
	}
	return nil
}

// decode unmarshals a call's input into v; an empty input is {}.
func decode(name string, in json.RawMessage, v any) error {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || string(in) == "null" {
		in = json.RawMessage("{}")
	}
	if err := json.Unmarshal(in, v); err != nil {
		return fmt.Errorf("invalid input for tool %s: %w", name, err)
	}
	return nil
}

// prop is one property of a JSON schema.
type prop struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// schema builds a JSON schema object. props is in declaration order.
func schema(required []string, props ...namedProp) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, p := range props {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.name)
		v, _ := json.Marshal(p.prop)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString(`},"required":`)
	if required == nil {
		required = []string{}
	}
	r, _ := json.Marshal(required)
	b.Write(r)
	b.WriteString(`,"additionalProperties":false}`)
	return json.RawMessage(b.Bytes())
}

type namedProp struct {
	name string
	prop prop
}

func str(name, desc string) namedProp {
	return namedProp{name, prop{Type: "string", Description: desc}}
}

func num(name, desc string) namedProp {
	return namedProp{name, prop{Type: "number", Description: desc}}
}

func boolean(name, desc string) namedProp {
	return namedProp{name, prop{Type: "boolean", Description: desc}}
}

// binaryExt lists extensions treated as binary without looking inside.
var binaryExt = map[string]bool{
	".zip": true, ".tar": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".zst": true,
	".exe": true, ".dll": true, ".so": true, ".dylib": true, ".class": true, ".jar": true, ".war": true,
	".7z": true, ".doc": true, ".docx": true, ".xls": true, ".xlsx": true, ".ppt": true, ".pptx": true,
	".odt": true, ".ods": true, ".odp": true, ".bin": true, ".dat": true, ".obj": true, ".o": true,
	".a": true, ".lib": true, ".wasm": true, ".pyc": true, ".pyo": true,
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".bmp": true, ".ico": true, ".webp": true,
	".pdf": true, ".mp3": true, ".mp4": true, ".mov": true, ".avi": true, ".wav": true, ".ogg": true,
	".woff": true, ".woff2": true, ".ttf": true, ".otf": true, ".sqlite": true, ".db": true,
}

// looksBinary reports whether sample (the head of a file) is binary: a NUL
// byte, or more than 30% control characters.
func looksBinary(sample []byte) bool {
	if len(sample) == 0 {
		return false
	}
	ctrl := 0
	for _, c := range sample {
		if c == 0 {
			return true
		}
		if c < 9 || (c > 13 && c < 32) {
			ctrl++
		}
	}
	return ctrl*10 > len(sample)*3
}

// isBinaryFile checks the extension and the first 4 KiB of f, then rewinds f.
func isBinaryFile(path string, f *os.File) (bool, error) {
	if binaryExt[strings.ToLower(filepath.Ext(path))] {
		return true, nil
	}
	buf := make([]byte, 4096)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return looksBinary(buf[:n]), nil
}

// skipDirs are directory names the walking tools never descend into.
var skipDirs = map[string]bool{".git": true}

// truncateRunes cuts s to at most n runes, appending suffix when cut.
func truncateRunes(s string, n int, suffix string) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + suffix
		}
		i++
	}
	return s
}
