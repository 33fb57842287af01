package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// nodeProject finds Node and npm (skipping without them, failing under
// CI=true) and makes the pinned npm project rel (e2e/acp, e2e/agui) ready:
// package.json and package-lock.json must pin one exact version of each of
// pkgs, and node_modules must hold what the lock pins (npm ci when it does
// not). It returns Node, the project's directory and the pinned versions.
func nodeProject(t *testing.T, rel string, pkgs ...string) (node, dir string, pinned map[string]string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node not found in PATH (Node 20.6 or later runs the scripts of %s)", rel)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing(t, "npm not found in PATH (it installs %s/node_modules)", rel)
	}
	if v, ok := nodeVersion(node); !ok {
		missing(t, "%s --version = %q: Node 20.6 or later is needed", node, v)
	}
	if dir, err = filepath.Abs(rel); err != nil {
		t.Fatal(err)
	}
	if pinned, err = pinnedVersions(dir, pkgs); err != nil {
		t.Fatal(err)
	}
	if stale := staleModules(dir); stale != "" {
		t.Logf("%s: %s; running npm ci", rel, stale)
		sdkRun(t, 5*time.Minute, dir, nil, npm, "ci", "--no-audit", "--no-fund")
		if stale := staleModules(dir); stale != "" {
			t.Fatalf("%s: after npm ci: %s", rel, stale)
		}
	}
	return node, dir, pinned
}

// pinnedVersions returns the versions of pkgs that dir's package.json and
// package-lock.json pin (one exact version of each in both).
func pinnedVersions(dir string, pkgs []string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil, fmt.Errorf("e2e: %w", err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return nil, fmt.Errorf("e2e: %s/package.json: %w", dir, err)
	}
	lock, err := readLockFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pkgs {
		spec := pkg.Dependencies[p]
		if spec == "" || spec != lock["node_modules/"+p] {
			return nil, fmt.Errorf("e2e: %s: package.json asks for %s %q, package-lock.json has %q: pin one exact version in both",
				dir, p, spec, lock["node_modules/"+p])
		}
		out[p] = spec
	}
	return out, nil
}

// staleModules says which package of dir's package-lock.json its
// node_modules does not hold at the pinned version, or "" when all are.
func staleModules(dir string) string {
	lock, err := lockPackages(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err.Error()
	}
	for _, p := range slices.Sorted(maps.Keys(lock)) {
		if !strings.HasPrefix(p, "node_modules/") {
			continue
		}
		var pkg struct {
			Version string `json:"version"`
		}
		raw, err := os.ReadFile(filepath.Join(dir, p, "package.json"))
		if errors.Is(err, fs.ErrNotExist) && lock[p].Optional {
			continue // another platform's build (npm installs the one for this machine)
		}
		if err == nil {
			err = json.Unmarshal(raw, &pkg)
		}
		if err != nil || pkg.Version != lock[p].Version {
			return fmt.Sprintf("%s is not installed at %s (have %q)", p, lock[p].Version, pkg.Version)
		}
	}
	return ""
}

// readLockFile returns the version of every package in a package-lock.json,
// by its node_modules path.
func readLockFile(path string) (map[string]string, error) {
	pkgs, err := lockPackages(path)
	out := map[string]string{}
	for p, v := range pkgs {
		out[p] = v.Version
	}
	return out, err
}

type lockPackage struct {
	Version  string `json:"version"`
	Optional bool   `json:"optional"`
}

// lockPackages returns the packages of a package-lock.json (but the
// project itself), by their node_modules path.
func lockPackages(path string) (map[string]lockPackage, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("e2e: %w", err)
	}
	var lock struct {
		Packages map[string]lockPackage `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		return nil, fmt.Errorf("e2e: %s: %w", path, err)
	}
	delete(lock.Packages, "")
	return lock.Packages, nil
}
