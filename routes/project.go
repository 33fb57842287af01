package routes

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// projects maps a directory to its project, as OpenCode scopes a request:
// the git work tree it is in, or "global" for every directory outside git.
type projects struct{ roots sync.Map }

func (p *projects) of(dir string) string {
	if v, ok := p.roots.Load(dir); ok {
		return v.(string)
	}
	root := "global"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--show-toplevel").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			root = r
		}
	}
	p.roots.Store(dir, root)
	return root
}
