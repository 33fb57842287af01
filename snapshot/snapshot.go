// Package snapshot records the state of a project's files at each model
// step, as OpenCode does, so a session can be reverted to the files as they
// were before a message and restored again. Each project gets a git
// repository of its own under the data directory (never the project's own
// .git): a snapshot is the tree hash of the work tree, .gitignore honoured.
// Only projects inside a git work tree are tracked, as in OpenCode.
package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/atomicfile"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// Snapshots hands out the snapshot repository of each project directory.
type Snapshots struct {
	root string // <data>/snapshot
	// mu guards reps; it is never held while git runs (a slow directory
	// must not hold up every other session's snapshots).
	mu   sync.Mutex
	reps map[string]*lookup
}

// lookup is one directory's answer to "is it in a git work tree?": being
// found (done open), a repository, or none until expires (a `git init`
// later is seen).
type lookup struct {
	done    chan struct{}
	repo    *Repo
	expires time.Time
}

var (
	// lookupTimeout bounds the git that finds a directory's work tree.
	lookupTimeout = 10 * time.Second
	// notRepoTTL is how long a directory found outside git stays so.
	notRepoTTL = 2 * time.Second
)

// New keeps snapshot repositories under dataDir/snapshot. An empty dataDir
// (the in-memory store) keeps them in a temporary directory.
func New(dataDir string) *Snapshots {
	if dataDir == "" {
		dataDir = filepath.Join(os.TempDir(), "opencode-server-snapshots")
	}
	return &Snapshots{root: filepath.Join(dataDir, "snapshot"), reps: map[string]*lookup{}}
}

// For returns the repository of the project at dir, or nil when dir is not
// in a git work tree (or git is missing, or ctx ends first): nothing is
// tracked there. Concurrent calls for one directory share one git.
func (s *Snapshots) For(ctx context.Context, dir string) *Repo {
	if s == nil || dir == "" {
		return nil
	}
	s.mu.Lock()
	l := s.reps[dir]
	if l != nil {
		select {
		case <-l.done:
			if l.repo == nil && time.Now().After(l.expires) {
				l = nil // look again
			}
		default:
		}
	}
	if l == nil {
		l = &lookup{done: make(chan struct{})}
		s.reps[dir] = l
		// Its own deadline, not the caller's: the others waiting for it
		// get the answer even if the first caller gives up.
		go s.find(dir, l)
	}
	s.mu.Unlock()
	select {
	case <-l.done:
		return l.repo
	case <-ctx.Done():
		return nil
	}
}

// find asks vcs.Discover whether dir is in a work tree. A failed or
// timed-out git is remembered as "none" only for notRepoTTL.
func (s *Snapshots) find(dir string, l *lookup) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	if repo, ok, err := vcs.Discover(ctx, dir); err == nil && ok && repo.InWorkTree {
		sum := sha1.Sum([]byte(dir))
		l.repo = &Repo{gitDir: filepath.Join(s.root, hex.EncodeToString(sum[:10])), work: dir}
	}
	l.expires = time.Now().Add(notRepoTTL)
	close(l.done)
}

// Repo is one project's snapshot repository. Its methods serialise on a
// mutex: git's index is one file.
type Repo struct {
	gitDir, work string
	mu           sync.Mutex
	ready        bool
}

func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir", r.gitDir, "--work-tree", r.work,
		"-c", "core.autocrlf=false", "-c", "core.quotepath=false", "-c", "core.longpaths=true"}, args...)...)
	cmd.Dir = r.work
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_INDEX_FILE="+filepath.Join(r.gitDir, "index"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := run(cmd, cmd.Output)
	if err != nil {
		return out, fmt.Errorf("snapshot: git %s: %v: %s", args[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func (r *Repo) init(ctx context.Context) error {
	if r.ready {
		return nil
	}
	// A git killed half-way (the server with it) leaves its index lock,
	// and every later git call here would fail on it. The data directory
	// is this process's alone, and no git of this process has run on the
	// repository yet: the lock is stale.
	if err := os.Remove(filepath.Join(r.gitDir, "index.lock")); err == nil {
		slog.Warn("snapshot: removed a stale index lock", "repo", r.gitDir)
	}
	if _, err := os.Stat(filepath.Join(r.gitDir, "HEAD")); err != nil {
		if err := os.MkdirAll(r.gitDir, 0o755); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "git", "init", "--quiet", "--bare", r.gitDir)
		if out, err := run(cmd, cmd.CombinedOutput); err != nil {
			return fmt.Errorf("snapshot: git init: %v: %s", err, out)
		}
	}
	r.ready = true
	return nil
}

// Track records the work tree and returns its snapshot (a tree hash).
func (r *Repo) Track(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.track(ctx)
}

func (r *Repo) track(ctx context.Context) (string, error) {
	if err := r.init(ctx); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "add", "--all", "--", "."); err != nil {
		return "", err
	}
	out, err := r.git(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Restore puts the work tree back to snapshot hash: changed files get
// their recorded content, files created since are removed. Ignored files
// are left alone.
func (r *Repo) Restore(ctx context.Context, hash string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, err := r.track(ctx)
	if err != nil {
		return err
	}
	if cur == hash {
		return nil
	}
	added, err := r.git(ctx, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--diff-filter=A", hash, cur)
	if err != nil {
		return err
	}
	for _, p := range strings.Split(string(added), "\x00") {
		if p != "" {
			_ = os.Remove(filepath.Join(r.work, p))
		}
	}
	if _, err := r.git(ctx, "read-tree", hash); err != nil {
		return err
	}
	_, err = r.git(ctx, "checkout-index", "--all", "--force")
	return err
}

// Diff is the unified diff from snapshot a to snapshot b.
func (r *Repo) Diff(ctx context.Context, a, b string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, err := r.git(ctx, "diff", "--no-ext-diff", "--no-renames", a, b)
	return strings.TrimRight(string(out), "\n"), err
}

// Patches is Changed with each file's unified diff.
func (r *Repo) Patches(ctx context.Context, a, b string) ([]opencode.FileDiff, error) {
	out, err := r.Changed(ctx, a, b)
	if err != nil || len(out) == 0 {
		return out, err
	}
	r.mu.Lock()
	text, err := r.git(ctx, "diff", "--no-ext-diff", "--no-renames", a, b)
	r.mu.Unlock()
	if err != nil {
		return out, err
	}
	// One diff for all files, cut at each file's header.
	byFile := map[string]string{}
	for _, chunk := range strings.Split("\n"+string(text), "\ndiff --git ")[1:] {
		head, _, _ := strings.Cut(chunk, "\n")
		if _, name, ok := strings.Cut(head, " b/"); ok {
			byFile[name] = "diff --git " + strings.TrimRight(chunk, "\n") + "\n"
		}
	}
	for i := range out {
		out[i].Patch = byFile[out[i].File]
	}
	return out, nil
}

// Changed lists the files that differ between snapshots a and b.
func (r *Repo) Changed(ctx context.Context, a, b string) ([]opencode.FileDiff, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []opencode.FileDiff{}
	if a == b {
		return out, nil
	}
	num, err := r.git(ctx, "diff-tree", "-r", "--no-renames", "--numstat", a, b)
	if err != nil {
		return nil, err
	}
	st, err := r.git(ctx, "diff-tree", "-r", "--no-renames", "--name-status", a, b)
	if err != nil {
		return nil, err
	}
	status := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(st)), "\n") {
		if k, p, ok := strings.Cut(line, "\t"); ok {
			status[p] = map[string]string{"A": "added", "D": "deleted"}[k]
			if status[p] == "" {
				status[p] = "modified"
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(num)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			continue
		}
		add, _ := strconv.Atoi(f[0])
		del, _ := strconv.Atoi(f[1])
		out = append(out, opencode.FileDiff{File: f[2], Additions: add, Deletions: del, Status: status[f[2]]})
	}
	return out, nil
}

// A restore intent is written before a revert or unrevert changes the
// work tree and removed once the session's new state is stored; one left
// behind (a crash in between) is rolled forward when the session's runner
// starts again, so the files and the session's revert always agree.

func (s *Snapshots) intentPath(session string) string {
	return filepath.Join(s.root, "intent", session+".json")
}

// WriteIntent stores session's restore intent durably (written whole,
// then renamed into place, the directory synced).
func (s *Snapshots) WriteIntent(session string, data []byte) error {
	if s == nil {
		return nil
	}
	return atomicfile.Write(s.intentPath(session), data, 0o600)
}

// Intent is session's restore intent left behind, if any.
func (s *Snapshots) Intent(session string) ([]byte, bool) {
	if s == nil {
		return nil, false
	}
	b, err := os.ReadFile(s.intentPath(session))
	return b, err == nil
}

// ClearIntent removes session's restore intent.
func (s *Snapshots) ClearIntent(session string) {
	if s != nil {
		_ = os.Remove(s.intentPath(session))
	}
}

// Intents are the sessions with a restore intent left behind.
func (s *Snapshots) Intents() []string {
	if s == nil {
		return nil
	}
	es, _ := os.ReadDir(filepath.Join(s.root, "intent"))
	var out []string
	for _, e := range es {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			out = append(out, id)
		}
	}
	return out
}
