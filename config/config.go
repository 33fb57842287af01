// Package config reads OpenCode's own configuration file, opencode.json, so
// the same file configures this server and `opencode serve`: providers with
// their base URL, key and models, the default model, permission rules.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/tailscale/hujson"
)

// File is the part of opencode.json this server uses.
type File struct {
	Model      string                    `json:"model,omitempty"`
	SmallModel string                    `json:"small_model,omitempty"`
	Provider   map[string]ProviderConfig `json:"provider,omitempty"`
	// DisabledProviders are left out of the catalog; EnabledProviders,
	// when set, are the only ones kept.
	DisabledProviders []string        `json:"disabled_providers,omitempty"`
	EnabledProviders  []string        `json:"enabled_providers,omitempty"`
	Permission        json.RawMessage `json:"permission,omitempty"`
	Username          string          `json:"username,omitempty"`
	// MCP is mcp.<name>: the MCP servers whose tools the model gets.
	MCP map[string]MCPConfig `json:"mcp,omitempty"`
	// Agent is agent.<name>: custom agents, or changes to built-in ones.
	Agent map[string]AgentConfig `json:"agent,omitempty"`
	// Instructions are extra instruction files (paths, globs) for the
	// system prompt; later config files add to earlier ones.
	Instructions []string `json:"instructions,omitempty"`
	// Command is OpenCode's custom commands: command.<name>.
	Command map[string]CommandConfig `json:"command,omitempty"`
	// References are references.<name>, in the order written (later files
	// replace a name in place): read by parseReferences.
	References []Reference `json:"-"`
}

// MCPConfig is mcp.<name>: a local server (a command speaking MCP on
// stdio) or a remote one (an HTTP URL).
type MCPConfig struct {
	Type        string            `json:"type"` // local, remote
	Command     []string          `json:"command,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Enabled     *bool             `json:"enabled,omitempty"`
	// Timeout is how long connecting and listing tools may take, in ms.
	Timeout int `json:"timeout,omitempty"`
}

// AgentConfig is agent.<name> (or an agent markdown file's front matter,
// its body being the prompt).
type AgentConfig struct {
	Description string          `json:"description,omitempty"`
	Mode        string          `json:"mode,omitempty"` // primary, subagent, all
	Model       string          `json:"model,omitempty"`
	Prompt      string          `json:"prompt,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	Tools       map[string]bool `json:"tools,omitempty"`
	Permission  json.RawMessage `json:"permission,omitempty"`
	Disable     bool            `json:"disable,omitempty"`
	Steps       int             `json:"steps,omitempty"`
	// ACP makes the agent an external one: a process spoken to over the
	// Agent Client Protocol produces its turns (OpenCode's AgentConfig
	// takes extra keys, so the file still loads there).
	ACP *ACPConfig `json:"acp,omitempty"`
}

// ACPConfig is agent.<name>.acp: how to start an external ACP agent.
type ACPConfig struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// ProtocolVersion is the ACP version initialize offers: 1 (the
	// default) or 2, the draft v2 with session/inject. An agent that
	// answers 2 is spoken to in v2 either way.
	ProtocolVersion int `json:"protocolVersion,omitempty"`
}

// CommandConfig is command.<name>: a prompt template run by /name.
type CommandConfig struct {
	Template    string `json:"template"`
	Description string `json:"description,omitempty"`
	Agent       string `json:"agent,omitempty"`
	Model       string `json:"model,omitempty"`
	Subtask     *bool  `json:"subtask,omitempty"`
}

// ProviderConfig is provider.<id>.
type ProviderConfig struct {
	NPM  string `json:"npm,omitempty"`
	Name string `json:"name,omitempty"`
	// API is the provider's base URL as models.dev names it; Env the
	// variables its key may be in.
	API string   `json:"api,omitempty"`
	Env []string `json:"env,omitempty"`
	// Whitelist, when set, are the only models kept; Blacklist are left out.
	Whitelist []string               `json:"whitelist,omitempty"`
	Blacklist []string               `json:"blacklist,omitempty"`
	Options   ProviderOptions        `json:"options,omitempty"`
	Models    map[string]ModelConfig `json:"models,omitempty"`
}

// ProviderOptions is provider.<id>.options.
type ProviderOptions struct {
	BaseURL string            `json:"baseURL,omitempty"`
	APIKey  string            `json:"apiKey,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ModelConfig is provider.<id>.models.<id>: what OpenCode's config schema
// lets opencode.json say of a model. Absent fields are nil (or zero);
// catalog.FromConfig fills them in as OpenCode does.
type ModelConfig struct {
	Name        string `json:"name,omitempty"`
	Family      string `json:"family,omitempty"`
	ReleaseDate string `json:"release_date,omitempty"`
	ToolCall    *bool  `json:"tool_call,omitempty"`
	Reasoning   *bool  `json:"reasoning,omitempty"`
	Attachment  *bool  `json:"attachment,omitempty"`
	Temperature *bool  `json:"temperature,omitempty"`
	// Interleaved is whether (and in which response field) the model
	// interleaves its reasoning with the answer.
	Interleaved *Interleaved     `json:"interleaved,omitempty"`
	Modalities  *ModelModalities `json:"modalities,omitempty"`
	Limit       ModelLimit       `json:"limit,omitempty"`
	// Cost is in dollars per million tokens, as in OpenCode's model config.
	Cost *ModelCost `json:"cost,omitempty"`
	// Status is "alpha", "beta", "deprecated" or "active".
	Status string `json:"status,omitempty"`
}

// ModelLimit is a model's limit, in tokens (0: not given).
type ModelLimit struct {
	Context int64 `json:"context,omitempty"`
	Input   int64 `json:"input,omitempty"`
	Output  int64 `json:"output,omitempty"`
}

// ModelCost is a model's cost, dollars per million tokens.
type ModelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read,omitempty"`
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// ModelModalities are the kinds of input and output a model handles:
// "text", "audio", "image", "video", "pdf". A nil list is not given.
type ModelModalities struct {
	Input  []string `json:"input,omitempty"`
	Output []string `json:"output,omitempty"`
}

// Interleaved is a model's interleaved setting: true or false, or the
// name of the field carrying the reasoning (a string, or {"field": ...}).
type Interleaved struct {
	On    bool
	Field string
}

// UnmarshalJSON reads true/false, "reasoning_content" or {"field": "..."}.
func (i *Interleaved) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*i = Interleaved{On: on}
		return nil
	}
	var field string
	if err := json.Unmarshal(b, &field); err == nil {
		*i = Interleaved{On: true, Field: field}
		return nil
	}
	var obj struct {
		Field string `json:"field"`
	}
	if err := json.Unmarshal(b, &obj); err != nil || obj.Field == "" {
		return fmt.Errorf("interleaved: want a boolean, a field name or {\"field\": name}, got %s", b)
	}
	*i = Interleaved{On: true, Field: obj.Field}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (i Interleaved) MarshalJSON() ([]byte, error) {
	if i.Field != "" {
		return json.Marshal(map[string]string{"field": i.Field})
	}
	return json.Marshal(i.On)
}

// GlobalDir is the global config directory: $XDG_CONFIG_HOME/opencode, or
// ~/.config/opencode.
func GlobalDir() string {
	cfgHome := os.Getenv("XDG_CONFIG_HOME")
	if cfgHome == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cfgHome = filepath.Join(h, ".config")
	}
	return filepath.Join(cfgHome, "opencode")
}

// StripJSONC turns JSONC (comments, trailing commas) into JSON.
func StripJSONC(b []byte) ([]byte, error) { return stripJSONC(b) }

// Paths returns the files OpenCode would read, lowest precedence first:
// the global config ($XDG_CONFIG_HOME/opencode/opencode.json[c] or
// ~/.config/opencode/...), $OPENCODE_CONFIG, then the project's
// opencode.json[c] in dir. Missing files are skipped by Load.
func Paths(dir string) []string {
	cfgHome := os.Getenv("XDG_CONFIG_HOME")
	if cfgHome == "" {
		if h, err := os.UserHomeDir(); err == nil {
			cfgHome = filepath.Join(h, ".config")
		}
	}
	var out []string
	if cfgHome != "" {
		for _, n := range []string{"config.json", "opencode.json", "opencode.jsonc"} {
			out = append(out, filepath.Join(cfgHome, "opencode", n))
		}
	}
	if p := os.Getenv("OPENCODE_CONFIG"); p != "" {
		out = append(out, p)
	}
	if dir != "" {
		out = append(out, filepath.Join(dir, "opencode.json"), filepath.Join(dir, "opencode.jsonc"))
	}
	return out
}

// Load reads and merges the files that exist, later ones overriding
// earlier ones key by key (providers and their models merge).
func Load(paths ...string) (*File, error) {
	out := &File{Provider: map[string]ProviderConfig{}}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f, err := Parse(b, filepath.Dir(p))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out.merge(f)
	}
	return out, nil
}

func (f *File) merge(o *File) {
	if o.Model != "" {
		f.Model = o.Model
	}
	if o.SmallModel != "" {
		f.SmallModel = o.SmallModel
	}
	if o.Username != "" {
		f.Username = o.Username
	}
	if o.DisabledProviders != nil {
		f.DisabledProviders = o.DisabledProviders
	}
	if o.EnabledProviders != nil {
		f.EnabledProviders = o.EnabledProviders
	}
	for _, in := range o.Instructions {
		if !slices.Contains(f.Instructions, in) {
			f.Instructions = append(f.Instructions, in)
		}
	}
	if len(o.Permission) > 0 {
		f.Permission = o.Permission
	}
	for name, m := range o.MCP {
		if f.MCP == nil {
			f.MCP = map[string]MCPConfig{}
		}
		f.MCP[name] = m
	}
	for name, a := range o.Agent {
		if f.Agent == nil {
			f.Agent = map[string]AgentConfig{}
		}
		f.Agent[name] = a
	}
	for name, c := range o.Command {
		if f.Command == nil {
			f.Command = map[string]CommandConfig{}
		}
		f.Command[name] = c
	}
	f.mergeReferences(o.References)
	for id, p := range o.Provider {
		cur, ok := f.Provider[id]
		if !ok {
			f.Provider[id] = p
			continue
		}
		if p.NPM != "" {
			cur.NPM = p.NPM
		}
		if p.Name != "" {
			cur.Name = p.Name
		}
		if p.API != "" {
			cur.API = p.API
		}
		if p.Env != nil {
			cur.Env = p.Env
		}
		if p.Whitelist != nil {
			cur.Whitelist = p.Whitelist
		}
		if p.Blacklist != nil {
			cur.Blacklist = p.Blacklist
		}
		if p.Options.BaseURL != "" {
			cur.Options.BaseURL = p.Options.BaseURL
		}
		if p.Options.APIKey != "" {
			cur.Options.APIKey = p.Options.APIKey
		}
		for k, v := range p.Options.Headers {
			if cur.Options.Headers == nil {
				cur.Options.Headers = map[string]string{}
			}
			cur.Options.Headers[k] = v
		}
		if cur.Models == nil {
			cur.Models = map[string]ModelConfig{}
		}
		for k, v := range p.Models {
			cur.Models[k] = v
		}
		f.Provider[id] = cur
	}
}

// Parse decodes one file: JSON with comments and trailing commas (JSONC),
// with {env:VAR} and {file:path} substituted as OpenCode does.
func Parse(b []byte, dir string) (*File, error) {
	b, err := stripJSONC(b)
	if err != nil {
		return nil, err
	}
	b = substitute(b, dir)
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if f.Provider == nil {
		f.Provider = map[string]ProviderConfig{}
	}
	if f.References, err = parseReferences(b, dir); err != nil {
		return nil, err
	}
	return &f, nil
}

var (
	envRef  = regexp.MustCompile(`\{env:([^}]+)\}`)
	fileRef = regexp.MustCompile(`\{file:([^}]+)\}`)
)

// substitute replaces {env:VAR} with the variable's value and {file:path}
// with the file's trimmed content, both JSON-escaped (they sit in strings).
func substitute(b []byte, dir string) []byte {
	esc := func(s string) []byte {
		j, _ := json.Marshal(s)
		return j[1 : len(j)-1]
	}
	b = envRef.ReplaceAllFunc(b, func(m []byte) []byte {
		return esc(os.Getenv(string(envRef.FindSubmatch(m)[1])))
	})
	return fileRef.ReplaceAllFunc(b, func(m []byte) []byte {
		p := string(fileRef.FindSubmatch(m)[1])
		if strings.HasPrefix(p, "~/") {
			if h, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(h, p[2:])
			}
		} else if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		c, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		return esc(strings.TrimSpace(string(c)))
	})
}

// stripJSONC turns JSONC (comments, trailing commas: the format of
// opencode.jsonc and of OpenCode's opencode.json) into standard JSON, with
// tailscale's hujson: a maintained parser rather than a hand-written one.
func stripJSONC(b []byte) ([]byte, error) {
	out, err := hujson.Standardize(append([]byte(nil), b...))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return out, nil
}

// SplitModel splits "provider/model" (the model part may contain slashes).
func SplitModel(s string) (providerID, modelID string, ok bool) {
	p, m, ok := strings.Cut(s, "/")
	if !ok || p == "" || m == "" {
		return "", "", false
	}
	return p, m, true
}

// ProviderIDs returns the configured provider IDs, sorted.
func (f *File) ProviderIDs() []string {
	ids := make([]string, 0, len(f.Provider))
	for id := range f.Provider {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
