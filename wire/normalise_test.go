package wire

// Normalisation: a capture becomes a golden, a list of sections of lines
//
//	HEAD :: SHAPE
//
// HEAD is the event type (or, for HTTP, "step: METHOD PATH -> STATUS
// media-type"); SHAPE is the frame (or response body) as JSON with every
// value replaced by its kind — "<str>", "<num>", "<bool>", null, "" (an
// empty string), "<time>" (an RFC 3339 string), "<ses>"/"<msg>"/"<prt>"/
// "<evt>"/"<per>"/"<call>" (IDs by prefix) — except the discriminators
// listed in keepValue, whose values stay. Keys come out sorted (encoding/json
// sorts map keys), so a line shows the recursive key set with value kinds:
// shape differences show, values do not.
//
// Per-session event sequences are compared, not the interleaving of
// sessions: /event is split into one section per session of the scenario
// (sessions are named ses1, ses2 … in creation order) plus one for events of
// no session. Of the delta events (*.delta) only the first of each streamed
// part stays: how many deltas a text becomes depends on chunking, not on
// the protocol.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// noise are events the real server publishes for its environment, not for
// the scenario; they are dropped from both sides.
var noise = []struct{ prefix, why string }{
	{"plugin.added", "plugin start-up on the first prompt of a fresh server (~45 events)"},
	{"catalog.updated", "model/provider catalog reload, part of plugin start-up"},
	{"reference.updated", "reference catalog reload, part of plugin start-up"},
	{"integration.updated", "integration catalog reload, part of plugin start-up"},
	{"file.watcher.updated", "file watcher of the project directory (timing of fs events)"},
	{"server.heartbeat", "timer (every 20 s real, 10 s ours), not caused by the scenario"},
	{"project.updated", "project metadata refresh, timer/fs driven"},
	{"lsp.", "language servers (all disabled on the real server; we have none)"},
	{"format", "formatters (all disabled on the real server; we have none)"},
	{"installation.", "auto-update checks (disabled)"},
	{"mcp.", "MCP servers (none configured)"},
}

func isNoise(typ string) bool {
	for _, n := range noise {
		if strings.HasPrefix(typ, n.prefix) {
			return true
		}
	}
	return false
}

// keepValue says whether the string value of key stays in a shape. These
// are the discriminators of OpenCode's unions (part type, role, status,
// finish reason, delivery, error names and tags, tool name) — without them
// every message.part.updated looks alike.
func keepValue(key string, parent map[string]any) bool {
	switch key {
	case "type", "role", "status", "finish", "reason", "delivery", "_tag", "tool", "field", "kind":
		return true
	case "name":
		_, isErr := parent["data"] // OpenCode's NamedError {name, data}
		return isErr
	}
	return false
}

var (
	idRe   = regexp.MustCompile(`^(ses|msg|prt|evt|per|que|call|toolu|usr|wrk|err)_[A-Za-z0-9_]+$`)
	timeRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	pathID = regexp.MustCompile(`(ses|msg|prt|evt|per|call)_[A-Za-z0-9_]+`)
)

// shape replaces the values of v by their kinds (see the package comment).
func shape(v any, key string, parent map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, vv := range x {
			out[k] = shape(vv, k, x)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = shape(vv, "", nil)
		}
		return out
	case string:
		switch {
		case keepValue(key, parent):
			return x
		case x == "":
			return ""
		case idRe.MatchString(x):
			return "<" + x[:strings.IndexByte(x, '_')] + ">"
		case timeRe.MatchString(x):
			return "<time>"
		}
		return "<str>"
	case json.Number, float64:
		return "<num>"
	case bool:
		return "<bool>"
	case nil:
		return nil
	}
	return fmt.Sprintf("<%T>", v)
}

// line is one golden line: HEAD :: SHAPE.
type line struct {
	Head  string
	Shape any // nil with NoBody: "-"
	// NoBody marks an HTTP answer without a body.
	NoBody bool
	// Raw is a non-JSON body's kind, e.g. "<text/html>".
	Raw string
}

func (l line) String() string {
	switch {
	case l.NoBody:
		return l.Head + " :: -"
	case l.Raw != "":
		return l.Head + " :: " + l.Raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(l.Shape)
	return l.Head + " :: " + strings.TrimSuffix(buf.String(), "\n")
}

// section is a titled list of lines.
type section struct {
	Name  string
	Lines []line
}

// golden is a normalised capture.
type golden struct {
	Scenario string
	Title    string
	Sections []section
}

func (g *golden) section(name string) *section {
	for i := range g.Sections {
		if g.Sections[i].Name == name {
			return &g.Sections[i]
		}
	}
	return nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

// normalise turns a capture into a golden.
func normalise(c *capture, title string) *golden {
	g := &golden{Scenario: c.Scenario, Title: title}
	sesName := map[string]string{}
	for i, s := range c.Sessions {
		sesName[s] = fmt.Sprintf("ses%d", i+1)
	}
	path := func(p string) string {
		return pathID.ReplaceAllStringFunc(p, func(id string) string {
			if n, ok := sesName[id]; ok {
				return "{" + n + "}"
			}
			return "{" + id[:strings.IndexByte(id, '_')] + "}"
		})
	}

	var h section
	h.Name = "http"
	for _, x := range c.HTTP {
		head := fmt.Sprintf("%s: %s %s -> %d", x.Step, x.Method, path(x.Path), x.Status)
		if x.ContentType != "" {
			head += " " + x.ContentType
		}
		l := line{Head: head}
		switch v, err := decode(x.Resp); {
		case len(x.Resp) == 0:
			l.NoBody = true
		case err != nil:
			l.Raw = "<" + x.ContentType + ">"
		default:
			l.Shape = shape(v, "", nil)
		}
		h.Lines = append(h.Lines, l)
	}
	g.Sections = append(g.Sections, h)

	lane := func(name string, fs []frame, keep func(frame) bool) {
		s := section{Name: name}
		defer func() {
			if len(c.Phases) > 0 && strings.HasPrefix(name, "event ses") && !strings.Contains(name, " info ") && len(s.Lines) == 0 {
				g.Sections = g.Sections[:len(g.Sections)-1] // an empty phase
			}
		}()
		seen := map[string]bool{}
		for _, f := range fs {
			if isNoise(f.Type) || !keep(f) {
				continue
			}
			if f.Key != "" {
				if seen[f.Key] {
					continue
				}
				seen[f.Key] = true
			}
			v, err := decode(f.Raw)
			if err != nil {
				s.Lines = append(s.Lines, line{Head: f.Type, Raw: "<not json>"})
				continue
			}
			if m, ok := v.(map[string]any); ok {
				delete(m, "type")
				if strings.HasPrefix(f.Key, "tool running|") {
					// Live progress: whether the first running update
					// already carries metadata.output races with the output.
					p, _ := m["properties"].(map[string]any)
					pt, _ := p["part"].(map[string]any)
					st, _ := pt["state"].(map[string]any)
					delete(st, "metadata")
				}
			}
			s.Lines = append(s.Lines, line{Head: f.Type, Shape: shape(v, "", nil)})
		}
		g.Sections = append(g.Sections, s)
	}
	if c.Scenario == "f" { // HTTP answers only
		return g
	}
	for _, sid := range c.Sessions {
		n := sesName[sid]
		// The main lane, split at the scenario's phases.
		bounds := append([]phase{{"", 0}}, c.Phases...)
		for i, ph := range bounds {
			end := len(c.Event)
			if i+1 < len(bounds) {
				end = min(bounds[i+1].At, end)
			}
			name := "event " + n
			if ph.Name != "" {
				name += " @ " + ph.Name
			}
			lane(name, c.Event[min(ph.At, end):end], func(f frame) bool { return f.Session == sid && !isInfo(f) })
		}
		lane("event "+n+" info (unordered)", c.Event, func(f frame) bool { return f.Session == sid && isInfo(f) })
		sortLines(&g.Sections[len(g.Sections)-1])
		if fs, ok := c.SessionEvent[sid]; ok {
			lane("session-event "+n, fs, func(frame) bool { return true })
			lane("replay "+n, c.Replay[sid], func(frame) bool { return true })
		}
	}
	lane("event (no session)", c.Event, func(f frame) bool { _, mine := sesName[f.Session]; return !mine && f.Session == "" })
	return g
}

const goldenHeader = `# wire golden: OpenCode 1.18.33 (opencode serve) as seen by wire/scenarios_test.go.
# Regenerate: go test ./wire -run TestRecordReference -wire.record -v -timeout 10m
# Line format: HEAD :: SHAPE (see wire/normalise_test.go); "== NAME" starts a section.
`

// String renders the golden file.
func (g *golden) String() string {
	var b strings.Builder
	b.WriteString(goldenHeader)
	fmt.Fprintf(&b, "# scenario %s: %s\n", g.Scenario, g.Title)
	for _, s := range g.Sections {
		fmt.Fprintf(&b, "== %s\n", s.Name)
		for _, l := range s.Lines {
			b.WriteString(l.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// parseGolden reads a golden file back.
func parseGolden(text string) (*golden, error) {
	g := &golden{}
	var cur *section
	for i, ln := range strings.Split(text, "\n") {
		switch {
		case ln == "":
			continue
		case strings.HasPrefix(ln, "# scenario "):
			name, title, _ := strings.Cut(strings.TrimPrefix(ln, "# scenario "), ": ")
			g.Scenario, g.Title = name, title
			continue
		case strings.HasPrefix(ln, "#"):
			continue
		case strings.HasPrefix(ln, "== "):
			g.Sections = append(g.Sections, section{Name: strings.TrimPrefix(ln, "== ")})
			cur = &g.Sections[len(g.Sections)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: outside a section", i+1)
		}
		head, body, ok := strings.Cut(ln, " :: ")
		if !ok {
			return nil, fmt.Errorf("line %d: no ' :: '", i+1)
		}
		l := line{Head: head}
		switch {
		case body == "-":
			l.NoBody = true
		case strings.HasPrefix(body, "<"):
			l.Raw = body
		default:
			v, err := decode([]byte(body))
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			l.Shape = v
		}
		cur.Lines = append(cur.Lines, l)
	}
	return g, nil
}

// isInfo: the session-info events the real server publishes from fibers
// running beside the turn (title generation, the per-step summary:
// session.updated, session.diff and the user message.updated that adds
// summary.diffs). Their place among the turn's events and among each other
// varies from run to run on the real server, so they go to a section of
// their own that is compared as a sorted multiset.
func isInfo(f frame) bool {
	switch f.Type {
	case "session.updated", "session.diff":
		return true
	case "message.updated":
		info, _ := props(f)["info"].(map[string]any)
		_, summary := info["summary"]
		return info["role"] == "user" && summary
	}
	return false
}

func sortLines(s *section) {
	sort.SliceStable(s.Lines, func(i, j int) bool { return s.Lines[i].String() < s.Lines[j].String() })
}

// sortedKeys is a helper for stable output.
func sortedKeys[M ~map[string]V, V any](m M) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
