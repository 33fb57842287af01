package routes_test

// The project, vcs and worktree routes against the real server's answers
// (testdata/reference/vcs, recorded by its record.sh on the projects its
// setup.sh builds): the same projects are built again, the same requests
// sent in the same order with the same file changes in between, and each
// answer compared with the recorded one, black-box over a real listener.
// Paths are normalised (the work directory is <W>), times are <ts>, the
// project ID <id>, random worktree names <name>; JSON is compared as
// values (key order aside). Where we answer differently on purpose the
// step says why.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

const vcsRefDir = "../testdata/reference/vcs"

// vcsRefWork is the work directory the references were recorded in.
const vcsRefWork = "/tmp/vcsref"

var (
	randomName = regexp.MustCompile(`\b(brave|calm|clever|cosmic|crisp|curious|eager|gentle|glowing|happy|hidden|jolly|kind|lucky|mighty|misty|neon|nimble|playful|proud|quick|quiet|shiny|silent|stellar|sunny|swift|tidy|witty)-(cabin|cactus|canyon|circuit|comet|eagle|engine|falcon|forest|garden|harbor|island|knight|lagoon|meadow|moon|mountain|nebula|orchid|otter|panda|pixel|planet|river|rocket|sailor|squid|star|tiger|wizard|wolf)\b`)
	timeField  = regexp.MustCompile(`"(created|updated|initialized)":\s*\d+`)
)

// vcsStep is one recorded request. compare says how its answer is
// compared: "" the whole body, "error" the status and the error's name and
// kind (messages are our own words), "name" an error named as recorded
// with git's words in its message, "skip" only the status (why says why).
type vcsStep struct {
	name, method, path, body string
	compare, why             string
	status                   int // our status where it differs on purpose
	before                   func(t *testing.T)
}

type vcsRun struct {
	t      *testing.T
	c      *http.Client
	url, w string
	id     string // the git project's ID, from our answers
	ref    string // the recorded one
}

func (v *vcsRun) norm(s, work, id string) string {
	s = strings.ReplaceAll(s, work, "<W>")
	if id != "" {
		s = strings.ReplaceAll(s, id, "<id>")
	}
	s = randomName.ReplaceAllString(s, "<name>")
	return timeField.ReplaceAllString(s, `"$1":"<ts>"`)
}

func (v *vcsRun) send(st vcsStep) (int, http.Header, []byte) {
	v.t.Helper()
	path := strings.NewReplacer("{P}", url.QueryEscape(v.w+"/project"), "{N}", url.QueryEscape(v.w+"/plain"),
		"{N2}", url.QueryEscape(v.w+"/plain2"), "{W}", v.w, "{ID}", v.id).Replace(st.path)
	body := strings.ReplaceAll(st.body, "{W}", v.w)
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(st.method, v.url+path, rd)
	if err != nil {
		v.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := v.c.Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", st.method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// recorded is a step's recorded status, Content-Type and body.
func recorded(t *testing.T, name string) (int, string, []byte) {
	t.Helper()
	hdr, err := os.ReadFile(filepath.Join(vcsRefDir, name+".http.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var status int
	var ct string
	for i, l := range strings.Split(string(hdr), "\n") {
		l = strings.TrimSpace(l)
		if i == 0 {
			f := strings.Fields(l)
			if len(f) > 1 {
				status = atoi(f[1])
			}
		}
		if v, ok := strings.CutPrefix(l, "Content-Type: "); ok {
			ct = v
		}
	}
	for _, ext := range []string{".json", ".txt"} {
		if b, err := os.ReadFile(filepath.Join(vcsRefDir, name+ext)); err == nil {
			return status, ct, b
		}
	}
	return status, ct, nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func decodeAny(t *testing.T, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", what, err, b)
	}
	return v
}

func (v *vcsRun) check(st vcsStep) []byte {
	t := v.t
	t.Helper()
	status, hdr, body := v.send(st)
	refStatus, refCT, refBody := recorded(t, st.name)
	want := refStatus
	if st.status != 0 {
		want = st.status
	}
	if status != want {
		t.Errorf("%s: status %d, want %d (%s): %s", st.name, status, want, st.why, body)
		return body
	}
	if ct := hdr.Get("Content-Type"); refCT != "" && ct != refCT && st.status == 0 {
		t.Errorf("%s: Content-Type %q, recorded %q", st.name, ct, refCT)
	}
	switch st.compare {
	case "skip":
		return body
	case "error", "name":
		got, ref := decodeAny(t, st.name, body).(map[string]any), decodeAny(t, st.name+" (recorded)", refBody).(map[string]any)
		gd, _ := got["data"].(map[string]any)
		rd, _ := ref["data"].(map[string]any)
		if got["name"] != ref["name"] || gd["kind"] != rd["kind"] || gd["reason"] != rd["reason"] {
			if st.status == 0 {
				t.Errorf("%s: error %s, recorded %s", st.name, body, refBody)
			}
		}
		if m, _ := gd["message"].(string); m == "" {
			t.Errorf("%s: error without a message: %s", st.name, body)
		}
		return body
	}
	g, r := v.norm(string(body), v.w, v.id), v.norm(string(refBody), vcsRefWork, v.ref)
	if !strings.Contains(hdr.Get("Content-Type"), "json") {
		if g != r {
			t.Errorf("%s: body\n%s\nrecorded\n%s", st.name, g, r)
		}
		return body
	}
	gv, rv := decodeAny(t, st.name, []byte(g)), decodeAny(t, st.name+" (recorded)", []byte(r))
	if !reflect.DeepEqual(gv, rv) {
		t.Errorf("%s: body\n%s\nrecorded\n%s", st.name, g, r)
	}
	return body
}

// checkReady compares the worktree.ready frames of /global/event with the
// recorded ones, and looks for the project's project.updated.
func (v *vcsRun) checkReady(global *stream) {
	t := v.t
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vcsRefDir, "global_event.sse"))
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		Directory string `json:"directory"`
		Payload   struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		} `json:"payload"`
	}
	ready := func(raw string, work, id string) (out []string, updated bool) {
		for _, l := range strings.Split(raw, "\n") {
			d, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				continue
			}
			var f frame
			if json.Unmarshal([]byte(d), &f) != nil {
				continue
			}
			switch f.Payload.Type {
			case "worktree.ready":
				b, _ := json.Marshal(f.Payload.Properties)
				out = append(out, v.norm(f.Directory+" "+string(b), work, id))
			case "project.updated":
				updated = updated || (f.Directory == "global" && f.Payload.Properties["id"] == id)
			}
		}
		return out, updated
	}
	want, _ := ready(string(raw), vcsRefWork, v.ref)
	var got []string
	var updated bool
	global.waitFor("4 worktree.ready", func(fs []string) bool {
		got, updated = ready(strings.Join(fs, "\n"), v.w, v.id)
		return len(got) >= len(want)
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worktree.ready frames\n%q\nrecorded\n%q", got, want)
	}
	if !updated {
		t.Error("no project.updated of the project on /global/event")
	}
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=ref", "GIT_AUTHOR_EMAIL=ref@example.com", "GIT_COMMITTER_NAME=ref",
		"GIT_COMMITTER_EMAIL=ref@example.com", "GIT_AUTHOR_DATE=2026-01-02T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-02T00:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds (10 s at most).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestVCSReference(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	w, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The machine's git configuration must not change the answers (a
	// default branch other than master for git init).
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("XDG_DATA_HOME", filepath.Join(w, "home", "data")) // where worktrees go, as the reference's
	// Start commands run in a login shell (bash -lc, as OpenCode's): the
	// machine user's profile must not be read (one here hung bash -lc).
	t.Setenv("HOME", filepath.Join(w, "home"))
	if out, err := exec.Command("bash", filepath.Join(vcsRefDir, "setup.sh"), w).CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v: %s", err, out)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ts := testserver.Start(t, testserver.Options{Directory: w + "/project"})
	v := &vcsRun{t: t, c: &http.Client{Transport: tr, Timeout: time.Minute}, url: ts.URL, w: w,
		id: strings.TrimSpace(runGit(t, w+"/project", "rev-list", "--max-parents=0", "HEAD"))}
	// The events: worktree.ready as OpenCode sends them, project.updated.
	e := &env{t: t, ts: ts, c: v.c, dir: w + "/project"}
	global := e.open("/global/event")
	global.header()
	var ref struct{ ID string }
	_, _, b := recorded(t, "git_project_current")
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	v.ref = ref.ID
	P := w + "/project"
	wtRoot := filepath.Join(w, "home", "data", "opencode", "worktree", v.id)
	malformed := "OpenCode answers a malformed body with 500 UnknownError; a client's error is a 400 here"
	steps := []vcsStep{
		// Outside git.
		{name: "plain_project_current", method: "GET", path: "/project/current?directory={N}"},
		{name: "plain_vcs", method: "GET", path: "/vcs?directory={N}"},
		{name: "plain_vcs_status", method: "GET", path: "/vcs/status?directory={N}"},
		{name: "plain_vcs_diff_git", method: "GET", path: "/vcs/diff?mode=git&directory={N}"},
		{name: "plain_vcs_diff_branch", method: "GET", path: "/vcs/diff?mode=branch&directory={N}"},
		{name: "plain_vcs_diff_raw", method: "GET", path: "/vcs/diff/raw?directory={N}"},
		{name: "plain_vcs_apply", method: "POST", path: "/vcs/apply?directory={N}", body: `{"patch":"x"}`},
		{name: "plain_worktree_list", method: "GET", path: "/experimental/worktree?directory={N}"},
		{name: "plain_worktree_create", method: "POST", path: "/experimental/worktree?directory={N}", body: `{}`},
		{name: "plain_worktree_remove", method: "DELETE", path: "/experimental/worktree?directory={N}", body: `{"directory":"{W}/nowhere"}`},
		{name: "plain_worktree_reset", method: "POST", path: "/experimental/worktree/reset?directory={N}", body: `{"directory":"{W}/nowhere"}`},

		// The git project, edited.
		{name: "git_project_current", method: "GET", path: "/project/current?directory={P}"},
		{name: "git_vcs", method: "GET", path: "/vcs?directory={P}"},
		{name: "git_vcs_status", method: "GET", path: "/vcs/status?directory={P}"},
		{name: "git_vcs_status_src", method: "GET", path: "/vcs/status?directory={P}%2Fsrc"},
		{name: "git_vcs_diff_git", method: "GET", path: "/vcs/diff?mode=git&directory={P}"},
		{name: "git_vcs_diff_git_context1", method: "GET", path: "/vcs/diff?mode=git&context=1&directory={P}"},
		{name: "git_vcs_diff_git_context0", method: "GET", path: "/vcs/diff?mode=git&context=0&directory={P}"},
		{name: "git_vcs_diff_branch", method: "GET", path: "/vcs/diff?mode=branch&directory={P}"},
		{name: "git_vcs_diff_raw", method: "GET", path: "/vcs/diff/raw?directory={P}"},
		{name: "git_vcs_diff_raw_src", method: "GET", path: "/vcs/diff/raw?directory={P}%2Fsrc", compare: "skip",
			why: "OpenCode runs git diff --no-index for untracked files in the subdirectory with paths of the root, and answers nothing; here they are found (checked below)"},
		{name: "bad_vcs_diff_nomode", method: "GET", path: "/vcs/diff?directory={P}", compare: "error"},
		{name: "bad_vcs_diff_mode", method: "GET", path: "/vcs/diff?mode=bogus&directory={P}", compare: "error"},
		{name: "bad_vcs_diff_context", method: "GET", path: "/vcs/diff?mode=git&context=-1&directory={P}", compare: "error"},
		{name: "bad_vcs_diff_context_abc", method: "GET", path: "/vcs/diff?mode=git&context=abc&directory={P}", compare: "error"},
		{name: "bad_vcs_apply_nopatch", method: "POST", path: "/vcs/apply?directory={P}", body: `{}`, compare: "error"},
		{name: "bad_vcs_apply_number", method: "POST", path: "/vcs/apply?directory={P}", body: `{"patch":5}`, compare: "error"},
		{name: "bad_vcs_apply_json", method: "POST", path: "/vcs/apply?directory={P}", body: `{"patch":`, compare: "error", status: 400, why: malformed},
		{name: "git_vcs_apply_garbage", method: "POST", path: "/vcs/apply?directory={P}", body: `{"patch":"not a patch"}`},
		{name: "git_vcs_apply_conflict", method: "POST", path: "/vcs/apply?directory={P}",
			body: `{"patch":"diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # Demo\n-nothing like this\n+x\n"}`},
		{name: "git_vcs_apply_ok", method: "POST", path: "/vcs/apply?directory={P}",
			body: `{"patch":"diff --git a/applied.txt b/applied.txt\nnew file mode 100644\n--- /dev/null\n+++ b/applied.txt\n@@ -0,0 +1 @@\n+applied\n"}`},
		{name: "git_vcs_status_after_apply", method: "GET", path: "/vcs/status?directory={P}"},
		{name: "git_vcs_apply_empty", method: "POST", path: "/vcs/apply?directory={P}", body: `{"patch":""}`},

		// Projects.
		{name: "project_list", method: "GET", path: "/project"},
		{name: "project_patch", method: "PATCH", path: "/project/{ID}?directory={P}",
			body: `{"name":"Demo","icon":{"color":"blue","url":"data:image/png;base64,AA=="},"commands":{"start":"true"}}`},
		{name: "project_patch_empty", method: "PATCH", path: "/project/{ID}?directory={P}", body: `{}`},
		{name: "project_patch_override", method: "PATCH", path: "/project/{ID}?directory={P}", body: `{"icon":{"override":"data:x"}}`},
		{name: "project_list_after_patch", method: "GET", path: "/project"},
		{name: "project_patch_unknown", method: "PATCH", path: "/project/nosuch?directory={P}", body: `{"name":"x"}`},
		{name: "bad_project_patch_name", method: "PATCH", path: "/project/{ID}?directory={P}", body: `{"name":5}`, compare: "error"},
		{name: "bad_project_patch_icon", method: "PATCH", path: "/project/{ID}?directory={P}", body: `{"icon":"blue"}`, compare: "error"},
		{name: "bad_project_patch_json", method: "PATCH", path: "/project/{ID}?directory={P}", body: `{`, compare: "error", status: 400, why: malformed},
		{name: "project_directories", method: "GET", path: "/project/{ID}/directories"},
		{name: "project_directories_global", method: "GET", path: "/project/global/directories"},
		{name: "project_directories_unknown", method: "GET", path: "/project/nosuch/directories"},

		// Worktrees of the git project.
		{name: "worktree_list_empty", method: "GET", path: "/experimental/worktree?directory={P}"},
		{name: "worktree_create_named", method: "POST", path: "/experimental/worktree?directory={P}", body: `{"name":"My Feature!"}`},
		{name: "worktree_create_named_again", method: "POST", path: "/experimental/worktree?directory={P}", body: `{"name":"My Feature!"}`},
		{name: "worktree_create_random", method: "POST", path: "/experimental/worktree?directory={P}"},
		{name: "worktree_create_start", method: "POST", path: "/experimental/worktree?directory={P}",
			body: `{"name":"started","startCommand":"echo started > started.txt"}`},
		{name: "bad_worktree_create_name", method: "POST", path: "/experimental/worktree?directory={P}", body: `{"name":5}`, compare: "error"},
		{name: "worktree_list", method: "GET", path: "/experimental/worktree?directory={P}", before: func(t *testing.T) {
			// The worktrees are checked out when they are answered; the
			// start command runs after.
			for _, d := range []string{"my-feature", "started"} {
				if !exists(filepath.Join(wtRoot, d, "README.md")) {
					t.Errorf("worktree %s not checked out", d)
				}
			}
			waitFor(t, "the start command's started.txt", func() bool { return exists(filepath.Join(wtRoot, "started", "started.txt")) })
		}},
		{name: "worktree_project_current", method: "GET", path: "/project/current?directory=" + url.QueryEscape(wtRoot+"/my-feature"), compare: "skip",
			why: "OpenCode answers the sandboxes as they were when the worktree's instance started (one); here as they are (checked below)"},
		{name: "worktree_vcs", method: "GET", path: "/vcs?directory=" + url.QueryEscape(wtRoot+"/my-feature")},
		{name: "worktree_vcs_status", method: "GET", path: "/vcs/status?directory=" + url.QueryEscape(wtRoot+"/my-feature")},
		{name: "worktree_project_list", method: "GET", path: "/project"},
		{name: "worktree_project_directories", method: "GET", path: "/project/{ID}/directories"},
		{name: "worktree_reset", method: "POST", path: "/experimental/worktree/reset?directory={P}", body: `{"directory":"` + wtRoot + `/my-feature"}`,
			before: func(t *testing.T) {
				writeFile(t, filepath.Join(wtRoot, "my-feature", "dirty.txt"), "dirty\n")
				writeFile(t, filepath.Join(wtRoot, "my-feature", "README.md"), "changed\n")
			}},
		{name: "worktree_reset_primary", method: "POST", path: "/experimental/worktree/reset?directory={P}", body: `{"directory":"{W}/project"}`,
			before: func(t *testing.T) {
				if exists(filepath.Join(wtRoot, "my-feature", "dirty.txt")) {
					t.Error("reset left dirty.txt")
				}
				if b, _ := os.ReadFile(filepath.Join(wtRoot, "my-feature", "README.md")); string(b) != "# Demo\nhello world\n" {
					t.Errorf("reset left README.md %q", b)
				}
			}},
		{name: "worktree_reset_unknown", method: "POST", path: "/experimental/worktree/reset?directory={P}", body: `{"directory":"{W}/nowhere"}`},
		{name: "bad_worktree_reset_nodir", method: "POST", path: "/experimental/worktree/reset?directory={P}", body: `{}`, compare: "error"},
		{name: "worktree_remove", method: "DELETE", path: "/experimental/worktree?directory={P}", body: `{"directory":"` + wtRoot + `/my-feature"}`},
		{name: "worktree_remove_unknown", method: "DELETE", path: "/experimental/worktree?directory={P}", body: `{"directory":"{W}/nowhere"}`,
			before: func(t *testing.T) {
				if exists(filepath.Join(wtRoot, "my-feature")) {
					t.Error("the removed worktree's directory is still there")
				}
				if strings.Contains(runGit(t, P, "branch"), "opencode/my-feature\n") {
					t.Error("the removed worktree's branch is still there")
				}
			}},
		{name: "worktree_remove_primary", method: "DELETE", path: "/experimental/worktree?directory={P}", body: `{"directory":"{W}/project"}`, compare: "name"},
		{name: "bad_worktree_remove_nodir", method: "DELETE", path: "/experimental/worktree?directory={P}", body: `{}`, compare: "error"},
		{name: "bad_worktree_remove_nobody", method: "DELETE", path: "/experimental/worktree?directory={P}", compare: "error"},
		{name: "worktree_list_after_remove", method: "GET", path: "/experimental/worktree?directory={P}"},
		{name: "worktree_project_list_after_remove", method: "GET", path: "/project"},

		// git init outside git.
		{name: "git_init", method: "POST", path: "/project/git/init?directory={N2}"},
		{name: "git_init_again", method: "POST", path: "/project/git/init?directory={N2}"},
		{name: "git_init_in_git", method: "POST", path: "/project/git/init?directory={P}"},
		{name: "git_init_project_list", method: "GET", path: "/project"},
		{name: "git_init_vcs_status", method: "GET", path: "/vcs/status?directory={N2}"},
		{name: "nohead_vcs", method: "GET", path: "/vcs?directory={N2}", before: func(t *testing.T) {
			writeFile(t, w+"/plain2/staged.txt", "one\n")
			runGit(t, w+"/plain2", "add", "staged.txt")
			writeFile(t, w+"/plain2/untracked.txt", "two\nlines\n")
		}},
		{name: "nohead_vcs_status", method: "GET", path: "/vcs/status?directory={N2}"},
		{name: "nohead_vcs_diff_git", method: "GET", path: "/vcs/diff?mode=git&directory={N2}"},
		{name: "nohead_vcs_diff_raw", method: "GET", path: "/vcs/diff/raw?directory={N2}"},
		{name: "nohead_worktree_create", method: "POST", path: "/experimental/worktree?directory={N2}", body: `{"name":"x"}`, compare: "name"},

		// Branch mode: a branch with a commit of its own.
		{name: "branch_dispose", method: "POST", path: "/instance/dispose?directory={P}", before: func(t *testing.T) {
			// record.sh stashes the edit; a commit of it on main leaves
			// the same state to compare (the branch diff starts after it).
			runGit(t, P, "add", "-A")
			runGit(t, P, "commit", "-q", "-m", "edit")
			runGit(t, P, "switch", "-q", "-c", "feature")
			writeFile(t, P+"/feature.txt", "feature\n")
			runGit(t, P, "add", "feature.txt")
			runGit(t, P, "commit", "-q", "-m", "feature")
			writeFile(t, P+"/work.txt", "work\n")
		}},
		{name: "branch_vcs", method: "GET", path: "/vcs?directory={P}"},
		{name: "branch_vcs_diff_branch", method: "GET", path: "/vcs/diff?mode=branch&directory={P}"},
		{name: "branch_vcs_diff_git", method: "GET", path: "/vcs/diff?mode=git&directory={P}"},
		{name: "branch_vcs_status", method: "GET", path: "/vcs/status?directory={P}"},
	}
	var rawAll []byte
	for _, st := range steps {
		if st.before != nil {
			st.before(t)
		}
		b := v.check(st)
		switch st.name {
		case "git_vcs_diff_raw":
			rawAll = b
		case "git_vcs_diff_raw_src":
			// The untracked file under src, as in the whole raw diff.
			if want := "diff --git a/src/ünï.txt b/src/ünï.txt\n"; !bytes.HasPrefix(b, []byte(want)) || !bytes.Contains(rawAll, b) {
				t.Errorf("raw diff of src: %q", b)
			}
		case "worktree_create_start":
			v.checkReady(global)
		case "worktree_project_current":
			var p struct{ Sandboxes []string }
			if err := json.Unmarshal(b, &p); err != nil || len(p.Sandboxes) != 4 {
				t.Errorf("worktree's project: %v %s", err, b)
			}
		}
	}
}
