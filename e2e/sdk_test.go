package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sdkDir is the Node project (relative to this package) that drives the
// server with the official JS SDK: e2e/sdk/src/*.ts, type-checked with tsc
// against @opencode-ai/sdk@1.18.33 (tsconfig.json) and against the latest
// release installed as the npm alias sdk-latest (tsconfig.latest.json).
const sdkDir = "sdk"

// sdkVersions are the SDK builds TestSDK runs: the tsconfig that
// type-checks and compiles the script against one SDK, where it compiles to,
// and the node --conditions that make "#sdk" resolve to that SDK at run time.
var sdkVersions = []struct {
	name      string // subtest name and log label
	pkg       string // the package-lock entry whose version is expected
	tsconfig  string
	out       string
	condition string
}{
	{name: "sdk-" + opencodeVersion, pkg: "node_modules/@opencode-ai/sdk", tsconfig: "tsconfig.json", out: "dist/" + opencodeVersion},
	{name: "sdk-latest", pkg: "node_modules/sdk-latest", tsconfig: "tsconfig.latest.json", out: "dist/latest", condition: "sdk-latest"},
}

// sdkMissing fails the test when CI=true and skips it otherwise: a
// prerequisite of the SDK test (node, npm) is unavailable.
func sdkMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatal("SDK e2e prerequisite missing (CI=true): " + msg)
	}
	t.Skip("SDK e2e prerequisite missing: " + msg + " (with CI=true this fails)")
}

// TestSDK drives the server with the official @opencode-ai/sdk, 1.18.33 and
// the latest release: v1 and v2 clients, clients made with `directory`,
// /event, /global/event and the v2 session event stream resumed with
// Last-Event-ID after dropped connections. Every answer is checked at run
// time against the shapes the SDK's typings promise (the script compiles
// with tsc in strict mode against each version's own .d.ts).
func TestSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		sdkMissing(t, "node not found in PATH (Node 20.6 or later runs e2e/sdk)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		sdkMissing(t, "npm not found in PATH (it installs e2e/sdk/node_modules)")
	}
	if v, ok := nodeVersion(node); !ok {
		sdkMissing(t, "%s --version = %q: Node 20.6 or later is needed", node, v)
	}
	dir, err := filepath.Abs(sdkDir)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := readLock(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if stale := staleModules(dir); stale != "" {
		t.Logf("e2e/sdk: %s; running npm ci", stale)
		sdkRun(t, 5*time.Minute, dir, nil, npm, "ci", "--no-audit", "--no-fund")
		if stale := staleModules(dir); stale != "" {
			t.Fatalf("e2e/sdk: after npm ci: %s", stale)
		}
	}
	tsc := filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")
	for _, v := range sdkVersions {
		// Type-check and compile against this SDK's typings (strict).
		sdkRun(t, 3*time.Minute, dir, nil, node, tsc, "-p", v.tsconfig)
	}
	for _, v := range sdkVersions {
		t.Run(v.name, func(t *testing.T) {
			want := lock[v.pkg]
			srv := startServer(t, serverOptions{chunks: 10})
			args := []string{}
			if v.condition != "" {
				args = append(args, "--conditions="+v.condition)
			}
			args = append(args, filepath.Join(v.out, "main.js"))
			env := []string{"BASE_URL=" + srv.URL, "PROJECT_DIR=" + srv.Dir, "SDK_LABEL=" + v.name, "SDK_VERSION=" + want}
			out := sdkRun(t, 5*time.Minute, dir, env, node, args...)
			t.Logf("@opencode-ai/sdk %s:\n%s", want, out)
			if !strings.Contains(out, "] PASS") {
				t.Fatalf("the SDK script exited 0 without PASS")
			}
		})
	}
}

// sdkRun runs name args in dir with env added and returns its output; a
// failure or timeout fails the test with the output.
func sdkRun(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	if err != nil {
		t.Fatalf("%s %s (in %s, %v): %v\n%s", filepath.Base(name), strings.Join(args, " "), dir,
			time.Since(start).Round(time.Millisecond), err, out.String())
	}
	return out.String()
}

var nodeVersionRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.`)

// nodeVersion reports node's version and whether it is 20.6 or later
// (import.meta.resolve, used by the script, is synchronous from there on).
func nodeVersion(node string) (string, bool) {
	out, err := exec.Command(node, "--version").Output()
	v := strings.TrimSpace(string(out))
	if err != nil {
		return v, false
	}
	m := nodeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return v, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return v, major > 20 || major == 20 && minor >= 6
}

// readLock returns the version of every package in package-lock.json, by
// its node_modules path.
func readLock(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("e2e/sdk: %w", err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		return nil, fmt.Errorf("e2e/sdk: %s: %w", path, err)
	}
	out := map[string]string{}
	for p, v := range lock.Packages {
		if p != "" {
			out[p] = v.Version
		}
	}
	for _, v := range sdkVersions {
		if out[v.pkg] == "" {
			return nil, fmt.Errorf("e2e/sdk: %s has no %s", path, v.pkg)
		}
	}
	return out, nil
}
