package tool

import (
	"strings"
)

// ReadTextFile reads the text file at path (absolute, or relative to dir)
// inside the session directory dir, through the same os.Root as the tools:
// a path or symlink leading out of dir is refused (ErrEscape). line
// (1-based) and limit, when above 0, select lines. ACP's fs/read_text_file
// for an external agent.
func ReadTextFile(dir, path string, line, limit int) (string, error) {
	_, rel, err := resolve(dir, path)
	if err != nil {
		return "", err
	}
	s, err := openScope(dir)
	if err != nil {
		return "", err
	}
	defer s.Close()
	b, err := s.root.ReadFile(s.name(rel))
	if err != nil {
		return "", s.fail(path, err)
	}
	text := string(b)
	if line <= 1 && limit <= 0 {
		return text, nil
	}
	lines := strings.SplitAfter(text, "\n")
	start := min(max(line-1, 0), len(lines))
	end := len(lines)
	if limit > 0 {
		end = min(start+limit, end)
	}
	return strings.Join(lines[start:end], ""), nil
}

// WriteTextFile writes content to path inside the session directory dir
// (creating its parent directories), confined as ReadTextFile. ACP's
// fs/write_text_file for an external agent.
func WriteTextFile(dir, path, content string) error {
	_, rel, err := resolve(dir, path)
	if err != nil {
		return err
	}
	s, err := openScope(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	name := s.name(rel)
	if i := strings.LastIndexByte(rel, '/'); i > 0 {
		if err := s.root.MkdirAll(s.name(rel[:i]), 0o755); err != nil {
			return s.fail(path, err)
		}
	}
	return s.fail(path, s.root.WriteFile(name, []byte(content), 0o644))
}
