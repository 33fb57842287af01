package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Reference is one entry of opencode.json's references.<name> (OpenCode
// reads a file's deprecated reference.<name> when it has no references): a
// named local directory or git repository the agent may consult. Value is
// the entry as written (a path or repository string, or an object); Dir is
// the directory of the file it is in, which a relative path is relative to.
type Reference struct {
	Name  string
	Value json.RawMessage
	Dir   string
}

// parseReferences reads a file's references in the order written.
func parseReferences(b []byte, dir string) ([]Reference, error) {
	var f struct {
		References json.RawMessage `json:"references"`
		Reference  json.RawMessage `json:"reference"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	raw := f.References
	if isNull(raw) {
		raw = f.Reference
	}
	if isNull(raw) {
		return nil, nil
	}
	names, values, err := ObjectEntries(raw)
	if err != nil {
		return nil, fmt.Errorf("references: %w", err)
	}
	out := make([]Reference, len(names))
	for i := range names {
		out[i] = Reference{Name: names[i], Value: values[i], Dir: dir}
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// mergeReferences adds o's references: a name already there keeps its place
// and takes the later file's entry, as OpenCode merges them.
func (f *File) mergeReferences(o []Reference) {
	for _, r := range o {
		replaced := false
		for i := range f.References {
			if f.References[i].Name == r.Name {
				f.References[i], replaced = r, true
				break
			}
		}
		if !replaced {
			f.References = append(f.References, r)
		}
	}
}

// ObjectEntries is a JSON object's keys and values in the order written.
func ObjectEntries(b []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("not a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}

// DataDir is OpenCode's data directory: $XDG_DATA_HOME/opencode, or
// ~/.local/share/opencode.
func DataDir() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		if home, err := os.UserHomeDir(); err == nil {
			data = filepath.Join(home, ".local", "share")
		}
	}
	return filepath.Join(data, "opencode")
}

// ReferenceInfo is a reference as GET /api/reference lists it (OpenCode's
// Reference.Info): where it is on disk and what the config said.
type ReferenceInfo struct {
	Name        string          `json:"name"`
	Path        string          `json:"path"`
	Description *string         `json:"description,omitempty"`
	Hidden      *bool           `json:"hidden,omitempty"`
	Source      ReferenceSource `json:"source"`
}

// ReferenceSource is a reference's source: a local directory (Path) or a
// git repository (Repository, as written, and Branch).
type ReferenceSource struct {
	Type        string  `json:"type"` // local, git
	Path        string  `json:"path,omitempty"`
	Repository  string  `json:"repository,omitempty"`
	Branch      *string `json:"branch,omitempty"`
	Description *string `json:"description,omitempty"`
	Hidden      *bool   `json:"hidden,omitempty"`
}

// Resolve is the reference as OpenCode 1.18.33 lists it, with home the
// user's home directory and repos where OpenCode keeps its clones of git
// references ($XDG_DATA_HOME/opencode/repos). It is not listed (ok false)
// when OpenCode leaves it out: a name with a slash, a space, a backtick or
// a comma; a repository that is not a git URL, host/path or GitHub
// owner/repo (a file: URL included); a branch git would not take; an entry
// of neither shape.
func (r Reference) Resolve(home, repos string) (ReferenceInfo, bool) {
	if r.Name == "" || strings.ContainsFunc(r.Name, func(c rune) bool {
		return c == '/' || c == '`' || c == ',' || unicode.IsSpace(c)
	}) {
		return ReferenceInfo{}, false
	}
	var entry struct {
		Path        *string `json:"path"`
		Repository  *string `json:"repository"`
		Branch      *string `json:"branch"`
		Description *string `json:"description"`
		Hidden      *bool   `json:"hidden"`
	}
	var s string
	if err := json.Unmarshal(r.Value, &s); err == nil {
		if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") {
			entry.Path = &s
		} else {
			entry.Repository = &s
		}
	} else if err := json.Unmarshal(r.Value, &entry); err != nil {
		return ReferenceInfo{}, false
	}
	info := ReferenceInfo{Name: r.Name, Description: entry.Description, Hidden: entry.Hidden}
	src := ReferenceSource{Description: entry.Description, Hidden: entry.Hidden}
	switch {
	case entry.Path != nil:
		src.Type, src.Path = "local", localPath(r.Dir, home, *entry.Path)
		info.Path = src.Path
	case entry.Repository != nil:
		host, segments, ok := parseRepository(*entry.Repository)
		if !ok {
			return ReferenceInfo{}, false
		}
		branch := ""
		if entry.Branch != nil {
			branch = *entry.Branch
		}
		if branch != "" && !validBranch(branch) {
			return ReferenceInfo{}, false
		}
		src.Type, src.Repository, src.Branch = "git", *entry.Repository, entry.Branch
		info.Path = filepath.Join(append(append([]string{repos}, strings.Split(host, ":")...), segments...)...)
		if branch != "" {
			info.Path += "@" + url.PathEscape(branch) // a valid branch's only escaped character is "/"
		}
	default:
		return ReferenceInfo{}, false
	}
	info.Source = src
	return info, true
}

// localPath resolves a local reference's path as OpenCode does: "~/" is
// the home directory, an absolute path stays as written, a relative one is
// relative to the config file's directory.
func localPath(dir, home, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	if filepath.IsAbs(p) {
		return p
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Join(dir, p)
}

var (
	githubShorthand = regexp.MustCompile(`^github:([^/\s]+)/([^/\s]+)$`)
	scpLike         = regexp.MustCompile(`^(?:[^@/\s]+@)?([^:/\s]+):(.+)$`)
	branchChars     = regexp.MustCompile(`^[A-Za-z0-9/_.-]+$`)
)

// parseRepository is a git reference's host and path segments, as
// OpenCode's Repository.parse reads one: a URL, scp-like user@host:path,
// host/path (a host has a dot or a colon, or is localhost), owner/repo or
// github:owner/repo for GitHub; ".git" endings dropped. A file: URL is a
// local repository, which references do not take.
func parseRepository(s string) (string, []string, bool) {
	e := strings.TrimPrefix(strings.TrimSpace(s), "git+")
	if i := strings.IndexByte(e, '#'); i >= 0 {
		e = e[:i]
	}
	e = strings.TrimRight(e, "/")
	if e == "" {
		return "", nil, false
	}
	if m := githubShorthand.FindStringSubmatch(e); m != nil {
		return repoRef("github.com", []string{m[1], m[2]})
	}
	if !strings.Contains(e, "://") {
		if m := scpLike.FindStringSubmatch(e); m != nil {
			return repoRef(m[1], segmentsOf(m[2]))
		}
		a := segmentsOf(e)
		if len(a) >= 2 && (strings.ContainsAny(a[0], ".:") || a[0] == "localhost") {
			return repoRef(a[0], a[1:])
		}
		if len(a) == 2 {
			return repoRef("github.com", a)
		}
	}
	u, err := url.Parse(e)
	if err != nil || u.Scheme == "" || u.Scheme == "file" {
		return "", nil, false
	}
	host := u.Host
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		host = u.Hostname() // a URL's default port is not part of its host
	}
	return repoRef(host, segmentsOf(u.EscapedPath()))
}

func segmentsOf(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s = strings.TrimSuffix(strings.TrimSpace(s), ".git"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func repoRef(host string, segments []string) (string, []string, bool) {
	bad := func(s string) bool {
		return strings.ContainsFunc(s, func(c rune) bool { return c == '/' || c == '\\' || unicode.IsSpace(c) })
	}
	var e []string
	for _, s := range segments {
		if s = strings.TrimSuffix(s, ".git"); s != "" {
			if s == "." || s == ".." || strings.Contains(s, ":") || bad(s) {
				return "", nil, false
			}
			e = append(e, s)
		}
	}
	if host == "" || strings.HasPrefix(host, "-") || bad(host) || len(e) == 0 {
		return "", nil, false
	}
	return strings.ToLower(host), e, true
}

// validBranch is OpenCode's Repository.validateBranch.
func validBranch(b string) bool {
	return branchChars.MatchString(b) && !strings.HasPrefix(b, "-") && !strings.Contains(b, "..")
}
