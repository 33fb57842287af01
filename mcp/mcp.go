// Package mcp connects the MCP servers of opencode.json (`mcp`: local ones
// run as a command speaking MCP on stdio, remote ones over streamable HTTP)
// with the official Go SDK, and offers their tools to the model as OpenCode
// does: each as "<server>_<tool>", its description and input schema as the
// server gives them, its call's text content as the output.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// defaultTimeout bounds connecting to a server and listing its tools.
const defaultTimeout = 5 * time.Second

// Status is one server's state, OpenCode's MCPStatus.
type Status struct {
	Status string `json:"status"` // connected, disabled, failed
	Error  string `json:"error,omitempty"`
}

// Servers are the MCP servers of the config (and those added since), each
// connected or not.
type Servers struct {
	mu       sync.Mutex
	dir      string
	log      *slog.Logger
	configs  map[string]config.MCPConfig
	sessions map[string]*sdk.ClientSession
	status   map[string]Status
	tools    map[string][]tool.Tool
}

// Start connects to every enabled server of cfg at once (each within its
// timeout) and lists its tools; a server that fails is reported by Status
// and contributes nothing. dir is where local commands run.
func Start(ctx context.Context, cfg map[string]config.MCPConfig, dir string, log *slog.Logger) *Servers {
	s := &Servers{dir: dir, log: log, configs: map[string]config.MCPConfig{}, sessions: map[string]*sdk.ClientSession{},
		status: map[string]Status{}, tools: map[string][]tool.Tool{}}
	var wg sync.WaitGroup
	for name, c := range cfg {
		s.configs[name] = c
		if c.Enabled != nil && !*c.Enabled {
			s.mu.Lock() // the connecting goroutines write the map too
			s.status[name] = Status{Status: "disabled"}
			s.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.connect(ctx, name, c)
		}()
	}
	wg.Wait()
	return s
}

// connect connects one server (replacing its session if it had one).
func (s *Servers) connect(ctx context.Context, name string, c config.MCPConfig) error {
	tools, sess, err := connect(ctx, name, c, s.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sessions[name]; old != nil {
		_ = old.Close()
		delete(s.sessions, name)
		delete(s.tools, name)
	}
	if err != nil {
		s.log.Warn("mcp server failed", "server", name, "err", err)
		s.status[name] = Status{Status: "failed", Error: err.Error()}
		return err
	}
	s.sessions[name], s.tools[name] = sess, tools
	s.status[name] = Status{Status: "connected"}
	return nil
}

// ErrUnknown is a server name the config does not have.
var ErrUnknown = errors.New("unknown MCP server")

// Connect (re)connects a configured server (POST /mcp/{name}/connect).
func (s *Servers) Connect(ctx context.Context, name string) error {
	s.mu.Lock()
	c, ok := s.configs[name]
	s.mu.Unlock()
	if !ok {
		return ErrUnknown
	}
	return s.connect(ctx, name, c)
}

// Disconnect closes a server's session; its tools leave the list
// (POST /mcp/{name}/disconnect).
func (s *Servers) Disconnect(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.configs[name]; !ok {
		return ErrUnknown
	}
	if sess := s.sessions[name]; sess != nil {
		_ = sess.Close()
	}
	delete(s.sessions, name)
	delete(s.tools, name)
	s.status[name] = Status{Status: "disabled"}
	return nil
}

// Add configures and connects a server for the rest of this run
// (POST /mcp), as OpenCode adds one to its running instance.
func (s *Servers) Add(ctx context.Context, name string, c config.MCPConfig) {
	s.mu.Lock()
	s.configs[name] = c
	s.mu.Unlock()
	_ = s.connect(ctx, name, c)
}

func connect(ctx context.Context, name string, c config.MCPConfig, dir string) ([]tool.Tool, *sdk.ClientSession, error) {
	timeout := defaultTimeout
	if c.Timeout > 0 {
		timeout = time.Duration(c.Timeout) * time.Millisecond
	}
	var transport sdk.Transport
	switch c.Type {
	case "local":
		if len(c.Command) == 0 {
			return nil, nil, errors.New("a local server needs a command")
		}
		cmd := exec.Command(c.Command[0], c.Command[1:]...)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		for k, v := range c.Environment {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		transport = &sdk.CommandTransport{Command: cmd}
	case "remote":
		if c.URL == "" {
			return nil, nil, errors.New("a remote server needs a url")
		}
		transport = &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: &http.Client{Transport: headers(c.Headers)}}
	default:
		return nil, nil, fmt.Errorf("unknown type %q (local or remote)", c.Type)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "opencode-server", Version: opencode.Version}, nil)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	list, err := sess.ListTools(cctx, &sdk.ListToolsParams{})
	if err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("list tools: %w", err)
	}
	var tools []tool.Tool
	for _, t := range list.Tools {
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = []byte(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, &mcpTool{name: sanitize(name) + "_" + sanitize(t.Name), remote: t.Name,
			desc: t.Description, schema: schema, sess: sess})
	}
	return tools, sess, nil
}

// headers adds fixed headers to every request of a remote server.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// sanitize makes a server or tool name fit a model's tool name, as
// OpenCode does.
func sanitize(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// Tools are the connected servers' tools, by name.
func (s *Servers) Tools() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tool.Tool
	for _, ts := range s.tools {
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b tool.Tool) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// Status is every configured server's state (GET /mcp).
func (s *Servers) Status() map[string]Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Status, len(s.status))
	for k, v := range s.status {
		out[k] = v
	}
	return out
}

// Close disconnects every server (a local one's process ends).
func (s *Servers) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sess := range s.sessions {
		_ = sess.Close()
		delete(s.sessions, name)
		delete(s.tools, name)
	}
}

// mcpTool is one tool of a server.
type mcpTool struct {
	name, remote, desc string
	schema             json.RawMessage
	sess               *sdk.ClientSession
}

func (t *mcpTool) Name() string                { return t.name }
func (t *mcpTool) Description() string         { return t.desc }
func (t *mcpTool) Parameters() json.RawMessage { return t.schema }

// Permission: an MCP tool's permission is its own name.
func (t *mcpTool) Permission(c tool.Call) (string, []string, error) {
	return t.name, []string{"*"}, nil
}

// Run calls the tool; its text content is the output, an error result an
// error.
func (t *mcpTool) Run(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args map[string]any
	if len(c.Input) > 0 && string(c.Input) != "null" {
		if err := json.Unmarshal(c.Input, &args); err != nil {
			return tool.Result{}, fmt.Errorf("invalid input for tool %s: %w", t.name, err)
		}
	}
	res, err := t.sess.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		return tool.Result{}, err
	}
	var texts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.TextContent:
			texts = append(texts, v.Text)
		default:
			if b, err := json.Marshal(v); err == nil {
				texts = append(texts, string(b))
			}
		}
	}
	out := strings.Join(texts, "\n\n")
	if res.IsError {
		return tool.Result{}, errors.New(out)
	}
	return tool.Result{Title: "", Output: out, Metadata: map[string]any{}}, nil
}
