package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/opencode-server/opencode-server/config"
)

// Auth is one credential of auth.json, OpenCode's Auth: an API key
// ({"type":"api","key"}), an OAuth login ({"type":"oauth","refresh",
// "access","expires"}) or a well-known token ({"type":"wellknown","key",
// "token"}). Raw keeps the entry as written, so rewriting the file keeps
// fields this server does not know.
type Auth struct {
	Type    string `json:"type"`
	Key     string `json:"key,omitempty"`
	Refresh string `json:"refresh,omitempty"`
	Access  string `json:"access,omitempty"`
	Expires int64  `json:"expires,omitempty"`
	Token   string `json:"token,omitempty"`
	// Label names the credential in the v2 integration routes (unset:
	// "default"); OpenCode's own tools do not write it.
	Label *string         `json:"label,omitempty"`
	Raw   json.RawMessage `json:"-"`
}

// Valid reports whether the entry has what its type needs.
func (a Auth) Valid() error {
	switch a.Type {
	case "api":
		if a.Key == "" {
			return fmt.Errorf("an api credential needs a key")
		}
	case "oauth":
		if a.Refresh == "" && a.Access == "" {
			return fmt.Errorf("an oauth credential needs refresh or access")
		}
	case "wellknown":
		if a.Key == "" || a.Token == "" {
			return fmt.Errorf("a wellknown credential needs key and token")
		}
	case "":
		return fmt.Errorf("type is required (api, oauth or wellknown)")
	default:
		return fmt.Errorf("unknown type %q (api, oauth or wellknown)", a.Type)
	}
	return nil
}

// AuthStore is auth.json: $XDG_DATA_HOME/opencode/auth.json (where
// `opencode auth login` and the TUI's connect dialog keep keys), or the
// content of OPENCODE_AUTH_CONTENT, which replaces the file (read-only).
type AuthStore struct {
	Path    string
	Content string // OPENCODE_AUTH_CONTENT
	Log     *slog.Logger
	mu      sync.Mutex
}

// DefaultAuthStore is the store the environment names.
func DefaultAuthStore(log *slog.Logger) *AuthStore {
	return &AuthStore{Path: filepath.Join(config.DataDir(), "auth.json"), Content: os.Getenv("OPENCODE_AUTH_CONTENT"), Log: log}
}

// All reads every credential; an entry that cannot be read is skipped
// with a log line (never its content: it may hold a secret).
func (s *AuthStore) All() map[string]Auth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.read()
}

func (s *AuthStore) read() map[string]Auth {
	out := map[string]Auth{}
	var b []byte
	if s.Content != "" {
		b = []byte(s.Content)
	} else {
		var err error
		if b, err = os.ReadFile(s.Path); err != nil {
			if !os.IsNotExist(err) {
				s.logger().Warn("auth.json unreadable", "path", s.Path, "err", err)
			}
			return out
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		s.logger().Warn("auth.json is not a JSON object; no credentials read from it", "path", s.Path)
		return out
	}
	for id, r := range raw {
		var a Auth
		if err := json.Unmarshal(r, &a); err != nil || a.Valid() != nil {
			s.logger().Warn("auth.json entry skipped: not a credential this server reads", "provider", id)
			continue
		}
		a.Raw = r
		out[id] = a
	}
	return out
}

// Set stores a credential for provider id (auth.json is rewritten
// atomically, mode 0600).
func (s *AuthStore) Set(id string, a Auth) error {
	if err := a.Valid(); err != nil {
		return err
	}
	if a.Raw == nil {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		a.Raw = b
	}
	return s.update(func(m map[string]json.RawMessage) bool { m[id] = a.Raw; return true })
}

// SetLabel names provider id's credential, keeping the rest of its entry
// as written; found is false (and nothing is written) when it has none.
func (s *AuthStore) SetLabel(id, label string) (found bool, err error) {
	err = s.update(func(m map[string]json.RawMessage) bool {
		raw, ok := m[id]
		if !ok {
			return false
		}
		keys, vals, err := config.ObjectEntries(raw)
		if err != nil {
			return false
		}
		l, _ := json.Marshal(label)
		var b bytes.Buffer
		b.WriteByte('{')
		for i, k := range keys {
			if k == "label" {
				continue
			}
			name, _ := json.Marshal(k)
			fmt.Fprintf(&b, "%s:%s,", name, vals[i])
		}
		fmt.Fprintf(&b, `"label":%s}`, l)
		m[id], found = b.Bytes(), true
		return true
	})
	return found, err
}

// Remove deletes provider id's credential.
func (s *AuthStore) Remove(id string) error {
	return s.update(func(m map[string]json.RawMessage) bool { delete(m, id); return true })
}

// update rewrites auth.json with change applied; a change that reports
// false leaves the file as it is.
func (s *AuthStore) update(change func(map[string]json.RawMessage) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Content != "" {
		return fmt.Errorf("credentials come from OPENCODE_AUTH_CONTENT, which cannot be changed")
	}
	m := map[string]json.RawMessage{}
	if b, err := os.ReadFile(s.Path); err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			m = map[string]json.RawMessage{} // an unreadable file is replaced
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	if !change(m) {
		return nil
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, id := range ids {
		if i > 0 {
			buf.WriteString(",")
		}
		k, _ := json.Marshal(id)
		fmt.Fprintf(&buf, "\n  %s: %s", k, m[id])
	}
	buf.WriteString("\n}\n")
	return writeAtomic(s.Path, buf.Bytes(), 0o600)
}

func (s *AuthStore) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}
