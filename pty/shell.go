package pty

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// shellTraits is OpenCode's table of shells: which start as login shells
// (their args get "-l") and which a user may not pick as the default.
var shellTraits = map[string]struct{ login, deny bool }{
	"bash": {login: true}, "dash": {login: true}, "fish": {login: true, deny: true}, "ksh": {login: true},
	"nu": {deny: true}, "sh": {login: true}, "zsh": {login: true},
}

func shellName(path string) string { return strings.ToLower(filepath.Base(path)) }

// resolve finds a shell: an absolute path that is a file, else a name on
// PATH ("" if neither).
func resolve(shell string) string {
	if filepath.IsAbs(shell) {
		if st, err := os.Stat(shell); err == nil && st.Mode().IsRegular() {
			return shell
		}
		return ""
	}
	p, err := exec.LookPath(shell)
	if err != nil {
		return ""
	}
	return p
}

// Preferred is the shell a terminal runs when the request names none, as
// OpenCode picks it: $SHELL if it resolves, else bash on PATH, else /bin/sh.
func Preferred() string {
	if s := os.Getenv("SHELL"); s != "" {
		if p := resolve(s); p != "" {
			return p
		}
	}
	if p := resolve("bash"); p != "" {
		return p
	}
	return "/bin/sh"
}

// Shell is one entry of GET /pty/shells.
type Shell struct {
	Path       string `json:"path"`
	Name       string `json:"name"`
	Acceptable bool   `json:"acceptable"`
}

// Shells lists the shells of /etc/shells that exist, as OpenCode lists
// them: the name is the base name when that resolves on PATH, else the
// path; fish and nu are not acceptable as the default.
func Shells() []Shell {
	if !supported {
		return []Shell{}
	}
	var list []string
	b, err := os.ReadFile("/etc/shells")
	if err == nil && len(b) > 0 {
		seen := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") || seen[l] {
				continue
			}
			seen[l] = true
			list = append(list, l)
		}
	} else {
		list = []string{"/bin/bash", "/bin/zsh", "/bin/sh"}
	}
	out := []Shell{}
	for _, p := range list {
		if resolve(p) == "" {
			continue
		}
		name := shellName(p)
		if resolve(name) == "" {
			name = p
		}
		out = append(out, Shell{Path: p, Name: name, Acceptable: !shellTraits[shellName(p)].deny})
	}
	return out
}
