package vcs

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Worktree is a git worktree made for a project (OpenCode's Worktree).
type Worktree struct {
	Name      string `json:"name"`
	Branch    string `json:"branch,omitempty"`
	Directory string `json:"directory"`
}

// WorktreeError is a worktree operation that failed, named as OpenCode
// names it (WorktreeNotGitError, WorktreeCreateFailedError, ...).
type WorktreeError struct {
	Name, Message string
}

func (e *WorktreeError) Error() string { return e.Message }

func notGit() error {
	return &WorktreeError{Name: "WorktreeNotGitError", Message: "Worktrees are only supported for git projects"}
}

// WorktreeRoot is where a project's worktrees go: OpenCode's place,
// $XDG_DATA_HOME/opencode/worktree/<projectID> (so both servers see the
// same ones).
func WorktreeRoot(projectID string) string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, "opencode", "worktree", projectID)
}

// The words of OpenCode's random names (its slugs).
var (
	adjectives = []string{"brave", "calm", "clever", "cosmic", "crisp", "curious", "eager", "gentle", "glowing", "happy",
		"hidden", "jolly", "kind", "lucky", "mighty", "misty", "neon", "nimble", "playful", "proud", "quick", "quiet",
		"shiny", "silent", "stellar", "sunny", "swift", "tidy", "witty"}
	nouns = []string{"cabin", "cactus", "canyon", "circuit", "comet", "eagle", "engine", "falcon", "forest", "garden",
		"harbor", "island", "knight", "lagoon", "meadow", "moon", "mountain", "nebula", "orchid", "otter", "panda",
		"pixel", "planet", "river", "rocket", "sailor", "squid", "star", "tiger", "wizard", "wolf"}
)

// RandomName is an adjective and a noun ("sunny-wolf").
func RandomName() string {
	return adjectives[rand.IntN(len(adjectives))] + "-" + nouns[rand.IntN(len(nouns))]
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// Slug is a worktree name made of a client's: lower case, runs of other
// characters as one "-" ("My Feature!" is my-feature).
func Slug(name string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(name)), "-"), "-")
}

// CreateWorktree adds a worktree to the project of id (whose work tree
// is the one the request is in) on a new branch opencode/<name>, under
// WorktreeRoot, and checks it out: the name given (as a slug) if free,
// else it with a random suffix, or a random one. The project's sandboxes
// are the caller's to update.
func CreateWorktree(ctx context.Context, id Identity, name string) (Worktree, error) {
	if !id.Git {
		return Worktree{}, notGit()
	}
	root := WorktreeRoot(id.ID)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Worktree{}, err
	}
	name = Slug(name)
	var wt Worktree
	for i := range 26 {
		n := RandomName()
		if name != "" {
			n = name
			if i > 0 {
				n = name + "-" + RandomName()
			}
		}
		dir := filepath.Join(root, n)
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		branch := "opencode/" + n
		res, err := git(ctx, id.Directory, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
		if err != nil {
			return Worktree{}, err
		}
		if res.ok() {
			continue
		}
		wt = Worktree{Name: n, Branch: branch, Directory: dir}
		break
	}
	if wt.Directory == "" {
		return Worktree{}, &WorktreeError{Name: "WorktreeNameGenerationFailedError", Message: "Failed to generate a unique worktree name"}
	}
	res, err := run(ctx, cmd{dir: id.Directory, args: []string{"worktree", "add", "--no-checkout", "-b", wt.Branch, wt.Directory}, long: true})
	if err != nil {
		return Worktree{}, err
	}
	if !res.ok() {
		return Worktree{}, &WorktreeError{Name: "WorktreeCreateFailedError", Message: res.message("Failed to create git worktree")}
	}
	// OpenCode checks the files out after it answered; here the answer
	// waits for them, so a client that does not wait for worktree.ready
	// finds them there.
	res, err = run(ctx, cmd{dir: wt.Directory, args: []string{"reset", "--hard"}, long: true})
	if err != nil {
		return wt, err
	}
	if !res.ok() {
		return wt, &WorktreeError{Name: "WorktreeCreateFailedError", Message: res.message("Failed to populate worktree")}
	}
	return wt, nil
}

// listed is one entry of git worktree list --porcelain.
type listed struct {
	path, branch string
}

func worktreeList(ctx context.Context, dir string) ([]listed, result, error) {
	res, err := git(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil || !res.ok() {
		return nil, res, err
	}
	var out []listed
	for _, l := range lines(res.text()) {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			out = append(out, listed{path: strings.TrimSpace(p)})
			continue
		}
		if b, ok := strings.CutPrefix(l, "branch "); ok && len(out) > 0 {
			out[len(out)-1].branch = strings.TrimSpace(b)
		}
	}
	return out, res, nil
}

// canonical is a path with its symbolic links resolved, when it exists.
func canonical(p string) string {
	p, _ = filepath.Abs(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return filepath.Clean(r)
	}
	return filepath.Clean(p)
}

func find(list []listed, dir string) (listed, bool) {
	for _, l := range list {
		if l.path != "" && canonical(l.path) == dir {
			return l, true
		}
	}
	return listed{}, false
}

// RemoveWorktree removes the project's worktree at dir and deletes its
// branch. A directory git does not list is removed only when it is
// inside the project's WorktreeRoot (a worktree git already forgot);
// elsewhere it is refused, where OpenCode would delete any directory
// named. A directory that does not exist is removed already.
func RemoveWorktree(ctx context.Context, id Identity, dir string) error {
	if !id.Git {
		return notGit()
	}
	target := canonical(dir)
	list, res, err := worktreeList(ctx, id.Directory)
	if err != nil {
		return err
	}
	if !res.ok() {
		return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: res.message("Failed to read git worktrees")}
	}
	entry, ok := find(list, target)
	if !ok {
		if _, err := os.Lstat(target); err != nil {
			return nil
		}
		if !inside(canonical(WorktreeRoot(id.ID)), target) {
			return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: "Not a worktree of this project: " + dir}
		}
		return removeAll(target)
	}
	res, err = run(ctx, cmd{dir: id.Directory, args: []string{"worktree", "remove", "--force", entry.path}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		again, res2, err := worktreeList(ctx, id.Directory)
		if err != nil {
			return err
		}
		if !res2.ok() {
			return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: firstOf(string(res.stderr), res.text(), string(res2.stderr), res2.text(), "Failed to remove git worktree")}
		}
		if _, still := find(again, target); still {
			return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: res.message("Failed to remove git worktree")}
		}
	}
	if err := removeAll(entry.path); err != nil {
		return err
	}
	if b := strings.TrimPrefix(entry.branch, "refs/heads/"); b != "" {
		res, err := git(ctx, id.Directory, "branch", "-D", b)
		if err != nil {
			return err
		}
		if !res.ok() {
			return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: res.message("Failed to delete worktree branch")}
		}
	}
	return nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// inside reports whether p is strictly inside dir.
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func removeAll(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return &WorktreeError{Name: "WorktreeRemoveFailedError", Message: err.Error()}
	}
	return nil
}

func resetFailed(res result, fallback string) error {
	return &WorktreeError{Name: "WorktreeResetFailedError", Message: res.message(fallback)}
}

// ResetWorktree puts the project's worktree at dir back to the default
// branch: reset --hard, clean -ffdx, submodules likewise; it fails when
// anything is left changed.
func ResetWorktree(ctx context.Context, id Identity, dir string) error {
	if !id.Git {
		return notGit()
	}
	target := canonical(dir)
	if target == canonical(id.Directory) {
		return &WorktreeError{Name: "WorktreeResetFailedError", Message: "Cannot reset the primary workspace"}
	}
	list, res, err := worktreeList(ctx, id.Directory)
	if err != nil {
		return err
	}
	if !res.ok() {
		return resetFailed(res, "Failed to read git worktrees")
	}
	entry, ok := find(list, target)
	if !ok {
		return &WorktreeError{Name: "WorktreeResetFailedError", Message: "Worktree not found"}
	}
	wt := entry.path
	def, err := repo{dir: id.Directory, root: id.Directory}.defaultBranch(ctx)
	if err != nil {
		return err
	}
	if def.name == "" {
		return &WorktreeError{Name: "WorktreeResetFailedError", Message: "Default branch not found"}
	}
	step := func(dir, fallback string, args ...string) error {
		res, err := run(ctx, cmd{dir: dir, args: args, long: true})
		if err != nil {
			return err
		}
		if !res.ok() {
			return resetFailed(res, fallback)
		}
		return nil
	}
	if i := strings.IndexByte(def.ref, '/'); def.ref != def.name && i > 0 {
		if err := step(id.Directory, "Failed to fetch "+def.ref, "fetch", def.ref[:i], def.ref[i+1:]); err != nil {
			return err
		}
	}
	if err := step(wt, "Failed to reset worktree to target", "reset", "--hard", def.ref); err != nil {
		return err
	}
	if err := clean(ctx, wt); err != nil {
		return err
	}
	for _, s := range []struct {
		fallback string
		args     []string
	}{
		{"Failed to update submodules", []string{"submodule", "update", "--init", "--recursive", "--force"}},
		{"Failed to reset submodules", []string{"submodule", "foreach", "--recursive", "git", "reset", "--hard"}},
		{"Failed to clean submodules", []string{"submodule", "foreach", "--recursive", "git", "clean", "-fdx"}},
	} {
		if err := step(wt, s.fallback, s.args...); err != nil {
			return err
		}
	}
	st, err := git(ctx, wt, "status", "--porcelain=v1")
	if err != nil {
		return err
	}
	if !st.ok() {
		return resetFailed(st, "Failed to read git status")
	}
	if left := strings.TrimSpace(st.text()); left != "" {
		return &WorktreeError{Name: "WorktreeResetFailedError", Message: "Worktree reset left local changes:\n" + left}
	}
	return nil
}

var failedRemove = regexp.MustCompile(`(?i)^warning:\s+failed to remove\s+(.+):\s+`)

// clean is git clean -ffdx; paths it could not remove (it says so in a
// warning) are removed by hand, inside the worktree only, and it runs
// once more.
func clean(ctx context.Context, wt string) error {
	res, err := run(ctx, cmd{dir: wt, args: []string{"clean", "-ffdx"}, long: true})
	if err != nil {
		return err
	}
	if res.ok() {
		return nil
	}
	var stuck []string
	for _, l := range lines(string(res.stderr) + "\n" + res.text()) {
		if m := failedRemove.FindStringSubmatch(l); m != nil {
			if p := strings.Trim(strings.TrimSpace(m[1]), `'"`); p != "" {
				stuck = append(stuck, p)
			}
		}
	}
	if len(stuck) == 0 {
		return resetFailed(res, "Failed to clean worktree")
	}
	root := canonical(wt)
	for _, p := range stuck {
		if abs := canonical(filepath.Join(wt, p)); inside(root, abs) {
			_ = os.RemoveAll(abs)
		}
	}
	res, err = run(ctx, cmd{dir: wt, args: []string{"clean", "-ffdx"}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return resetFailed(res, "Failed to clean worktree")
	}
	return nil
}

// ErrStartCommand is a start command that failed (it is only logged).
var ErrStartCommand = errors.New("worktree start command failed")

// StartCommand runs a project's or a worktree's start script in dir with
// bash -lc, as OpenCode runs it.
func StartCommand(ctx context.Context, dir, script string) error {
	script = strings.TrimSpace(script)
	if script == "" {
		return nil
	}
	res, err := run(ctx, cmd{dir: dir, long: true, bash: script})
	if err != nil {
		return err
	}
	if !res.ok() {
		return errors.Join(ErrStartCommand, errors.New(strings.TrimSpace(string(res.stderr))))
	}
	return nil
}

// InitError is a directory git init failed in (one that does not exist,
// or cannot be written).
type InitError struct{ Message string }

func (e *InitError) Error() string { return e.Message }

// Init makes dir a git repository (git init --quiet there).
func Init(ctx context.Context, dir string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return &InitError{Message: "Failed to initialize git repository: not a directory: " + dir}
	}
	res, err := run(ctx, cmd{dir: dir, args: []string{"init", "--quiet"}})
	if err != nil {
		return err
	}
	if !res.ok() {
		return &InitError{Message: strings.TrimSpace(firstOf(string(res.stderr), res.text(), "Failed to initialize git repository"))}
	}
	return nil
}
