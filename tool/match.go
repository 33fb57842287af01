package tool

import (
	"fmt"
	"path"
	"strings"
)

// matcher is a compiled glob with doublestar support: "**" as a whole path
// segment matches zero or more segments, other segments use path.Match, and
// {a,b} alternatives are expanded. Like ripgrep's --glob (which OpenCode
// uses), a pattern without a "/" matches the base name at any depth.
type matcher struct {
	alts [][]string // each alternative split into segments
	base []bool     // alternative matches the base name only
}

func compileGlob(pattern string) (*matcher, error) {
	if pattern == "" {
		return nil, fmt.Errorf("empty glob pattern")
	}
	m := &matcher{}
	for _, alt := range expandBraces(pattern) {
		alt = strings.TrimPrefix(alt, "./")
		anchored := strings.HasPrefix(alt, "/")
		alt = strings.Trim(alt, "/")
		if alt == "" {
			continue
		}
		segs := strings.Split(alt, "/")
		var clean []string
		for _, s := range segs {
			if s == "" || s == "." {
				continue
			}
			if s == "**" && len(clean) > 0 && clean[len(clean)-1] == "**" {
				continue
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("bad glob pattern %q: %w", pattern, err)
			}
			clean = append(clean, s)
		}
		if len(clean) == 0 {
			continue
		}
		m.alts = append(m.alts, clean)
		m.base = append(m.base, !anchored && len(clean) == 1 && clean[0] != "**")
	}
	if len(m.alts) == 0 {
		return nil, fmt.Errorf("bad glob pattern %q", pattern)
	}
	return m, nil
}

// match reports whether the slash-separated relative path rel matches.
func (m *matcher) match(rel string) bool {
	parts := strings.Split(rel, "/")
	for i, segs := range m.alts {
		if m.base[i] {
			if ok, _ := path.Match(segs[0], parts[len(parts)-1]); ok {
				return true
			}
			continue
		}
		if matchSegs(segs, parts) {
			return true
		}
	}
	return false
}

func matchSegs(pats, parts []string) bool {
	for len(pats) > 0 {
		if pats[0] == "**" {
			pats = pats[1:]
			if len(pats) == 0 {
				return true
			}
			for i := 0; i <= len(parts); i++ {
				if matchSegs(pats, parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pats[0], parts[0]); !ok {
			return false
		}
		pats, parts = pats[1:], parts[1:]
	}
	return len(parts) == 0
}

// expandBraces expands the first top-level {a,b,...} group recursively.
// Unbalanced braces are left as they are.
func expandBraces(p string) []string {
	start := -1
	depth := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 {
				var alts []string
				d, last := 0, start+1
				for j := start + 1; j < i; j++ {
					switch p[j] {
					case '\\':
						j++
					case '{':
						d++
					case '}':
						d--
					case ',':
						if d == 0 {
							alts = append(alts, p[last:j])
							last = j + 1
						}
					}
				}
				alts = append(alts, p[last:i])
				var out []string
				for _, a := range alts {
					out = append(out, expandBraces(p[:start]+a+p[i+1:])...)
					if len(out) > 1024 {
						return out
					}
				}
				return out
			}
		}
	}
	return []string{p}
}
