package wire

// TestRecordReference records the goldens from the real OpenCode server:
//
//	go test ./wire -run TestRecordReference -wire.record -v -timeout 10m
//
// It starts the stub model (this package's script) on 127.0.0.1:186xx and
// `opencode serve` 1.18.33 with ../shared/reference/start-opencode-serve.sh
// (override with -wire.start) in a scratch WORKDIR on 127.0.0.1:146xx, warms
// it up with one throw-away prompt (the first prompt of a fresh server loads
// plugins for ~2 s and a v2 prompt sent before that fails with
// ModelNotSelectedError), runs every scenario, and writes
// testdata/reference/wire/<scenario>.golden plus <scenario>.raw.jsonl (the
// raw frames and answers, paths replaced by /OCWORK and /PROJECT). The
// binary is taken from -wire.opencode-modules (default
// ~/.cache/opencode-server-e2e/node_modules, the e2e tests' install), linked
// into WORKDIR/npm so the script skips npm install. Without -wire.record the
// test is skipped.

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

var (
	record      = flag.Bool("wire.record", false, "record the goldens from the real opencode serve (TestRecordReference)")
	startScript = flag.String("wire.start", "../../shared/reference/start-opencode-serve.sh", "script starting the real server: SCRIPT WORKDIR PORT MODEL_BASE_URL")
	ocModules   = flag.String("wire.opencode-modules", "", "node_modules holding opencode-ai@1.18.33 (default ~/.cache/opencode-server-e2e/node_modules)")
	only        = flag.String("wire.only", "", "comma list of scenarios to run (default all)")
	runs        = flag.Int("wire.runs", 2, "TestRecordReference: run each scenario this many times; the normalised results must agree")
)

const goldenDir = "../testdata/reference/wire"

// freePort returns the first port of [lo, hi] that can be listened on.
func freePort(t testing.TB, lo, hi int) int {
	t.Helper()
	for p := lo; p <= hi; p++ {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatalf("no free port in %d-%d", lo, hi)
	return 0
}

// startStub starts the stub model on 127.0.0.1:186xx.
func startStub(t testing.TB) *stubmodel.Server {
	t.Helper()
	s := stubmodel.New(script, stubmodel.WithChunks(stubChunks), stubmodel.WithDelay(stubDelay))
	for p := 18600; p <= 18699; p++ {
		if _, err := s.Start(fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			t.Cleanup(s.Close)
			return s
		}
	}
	t.Fatalf("stub: no free port in 18600-18699")
	return nil
}

func selected(name string) bool {
	if *only == "" {
		return true
	}
	for _, n := range strings.Split(*only, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

func TestRecordReference(t *testing.T) {
	if !*record {
		t.Skip("records the goldens from the real server; run with -wire.record")
	}
	stub := startStub(t)
	work, err := os.MkdirTemp("", "wire-ref-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("real server's work dir kept: %s (serve.log)", work)
			return
		}
		_ = os.RemoveAll(work)
	})
	mods := *ocModules
	if mods == "" {
		home, _ := os.UserHomeDir()
		mods = filepath.Join(home, ".cache/opencode-server-e2e/node_modules")
	}
	if err := os.MkdirAll(filepath.Join(work, "npm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(work, "npm", "node_modules")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, 14600, 14699)
	out, err := exec.Command(*startScript, work, strconv.Itoa(port), stub.URL()).Output()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(work, "serve.log"))
		t.Fatalf("start real server: %v\n%s", err, log)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("start script printed %q", out)
	}
	t.Cleanup(func() { stopPid(pid) })
	tg := target{Base: fmt.Sprintf("http://127.0.0.1:%d", port), Quiet: time.Second}

	warmUp(t, tg)
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		if !selected(sc.Name) {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			c := runScenario(t, tg, sc)
			g := normalise(c, sc.Title)
			dropped := map[string]int{}
			for _, f := range c.Event {
				if isNoise(f.Type) {
					dropped[f.Type]++
				}
			}
			if len(dropped) > 0 {
				t.Logf("dropped as environment noise: %v", dropped)
			}
			// The real server must give the same golden every time, or the
			// normalisation misses a nondeterminism.
			for i := 1; i < *runs; i++ {
				if again := normalise(runScenario(t, tg, sc), sc.Title); again.String() != g.String() {
					t.Errorf("the real server's run %d differs from run 1 (nondeterminism the normalisation misses):\n%s", i+1, diffGoldens(g, again))
				}
			}
			writeFile(t, filepath.Join(goldenDir, sc.Name+".golden"), []byte(g.String()))
			writeFile(t, filepath.Join(goldenDir, sc.Name+".raw.jsonl"), rawCapture(c, map[string]string{
				filepath.Join(work, "project"): "/PROJECT",
				work:                           "/OCWORK",
			}))
		})
	}
}

// warmUp sends one prompt on a throw-away session and waits out the
// plugin start-up it triggers.
func warmUp(t *testing.T, tg target) {
	t.Helper()
	r := &run{t: t, tg: tg, live: map[string]*stream{}}
	r.ev = openStream(tg.Base + "/event")
	defer r.ev.close()
	sid := r.newSession("warm-up", false)
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	r.do("warm-up", "POST", "/session/"+sid+"/message", v1Text("warm up"))
	idle()
	// A fresh real server answers its first v2 prompt(s) with
	// ModelNotSelectedError in its log and no turn; retry until a v2 turn runs.
	for i := 0; ; i++ {
		sid := r.newSession("warm-up v2", false)
		r.do("warm-up v2", "POST", "/api/session/"+sid+"/prompt", v2Prompt("", "warm up v2", ""))
		if r.tryWait(10*time.Second, func() bool { return r.count(sid, v2Done) > 0 }) {
			break
		}
		if i == 5 {
			t.Fatalf("the real server runs no v2 turn")
		}
		t.Logf("warm-up: v2 prompt %d ran no turn; again", i+1)
	}
	// A margin beyond settle's second of quiet for the warm-up's
	// stragglers: the real server shows no sign that it is done with them.
	time.Sleep(2 * time.Second)
	r.settle()
}

func stopPid(pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 50; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rawCapture is the capture as JSON lines, with the given path prefixes
// replaced (longest first).
func rawCapture(c *capture, paths map[string]string) []byte {
	var b strings.Builder
	put := func(v any) {
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteByte('\n')
	}
	for _, x := range c.HTTP {
		var resp any = string(x.Resp)
		if json.Valid(x.Resp) && len(x.Resp) > 0 {
			resp = json.RawMessage(x.Resp)
		} else if len(x.Resp) > 300 {
			resp = string(x.Resp[:300]) + "…"
		}
		put(map[string]any{"http": x.Step, "method": x.Method, "path": x.Path, "body": x.Body, "status": x.Status, "contentType": x.ContentType, "response": resp})
	}
	frames := func(name string, fs []frame) {
		for _, f := range fs {
			if isNoise(f.Type) {
				continue
			}
			put(map[string]any{"stream": name, "frame": f.Raw})
		}
	}
	frames("/event", c.Event)
	for _, sid := range c.Sessions {
		if fs, ok := c.SessionEvent[sid]; ok {
			frames("/api/session/"+sid+"/event", fs)
			frames("/api/session/"+sid+"/event?after=0", c.Replay[sid])
		}
	}
	s := b.String()
	keys := sortedKeys(paths)
	for i := len(keys) - 1; i >= 0; i-- { // longest (project) before its parent
		k := keys[i]
		s = strings.ReplaceAll(s, k, paths[k])
		s = strings.ReplaceAll(s, strings.TrimPrefix(k, "/"), strings.TrimPrefix(paths[k], "/"))
	}
	return []byte(s)
}
