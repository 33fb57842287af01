package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestWebApp drives OpenCode's web app (1.18.33's, served by `opencode
// serve` itself, which embeds it, and proxied by our server through
// OPENCODE_WEB_APP_URL, so nothing leaves the machine) in headless
// Chromium against our server: it loads with no console error and no
// failed request, lists the project and its sessions, streams a reply and
// shows the tool line of a tool-calling model, and answers a permission
// ask. The terminal (/pty) and the review panel (/vcs) steps run once
// those routes exist; until then they are logged as skipped, and fail
// under CI=true. Screenshots go to $OPENCODE_E2E_ARTIFACTS/webapp (else
// a temp dir, logged); OPENCODE_E2E_SCREENSHOTS=1 also refreshes
// testdata/screenshots (README shows one).
func TestWebApp(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	_, ocBin := binaries(t)
	origin := startWebOrigin(t, ocBin)

	home := t.TempDir()
	dir := filepath.Join(home, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Demo\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(3), stubmodel.WithDelay(30*time.Millisecond))
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	body := `{"model":"stub/stub-model","small_model":"stub/stub-model","permission":{"bash":"ask"},` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"Stub","options":{"baseURL":"` + stub.URL() +
		`","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model","tool_call":true,"limit":{"context":128000,"output":4096}}}}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOptions{config: cfg, dir: dir, home: home, env: []string{"OPENCODE_WEB_APP_URL=" + origin}})

	// A session to list, made before the app opens.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/session", strings.NewReader(`{"title":"First session"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /session: %d", resp.StatusCode)
	}

	b := newBrowser(t, chromium)
	b.navigate(srv.URL + "/")
	b.waitText(30*time.Second, "Add project")
	b.shot("home")

	// The project: "Add project" lists the folders of the server's home;
	// the demo project opens with its sessions.
	b.clickText("button", "Add project")
	b.eval(fmt.Sprintf(`new Promise((ok, fail) => { const t0 = Date.now(); (function look() {
		const el = document.querySelector('[role=dialog] button[data-key=%q]');
		if (el) { el.click(); ok(true); return }
		if (Date.now() - t0 > 20000) { fail(new Error('no folder %s in the Open project dialog: ' + document.querySelector('[role=dialog]')?.innerText)); return }
		setTimeout(look, 100) })() })`, dir, dir))
	b.waitText(30*time.Second, "First session")
	b.waitText(10*time.Second, "demo")
	b.shot("project")

	// A prompt to the tool-calling model: the reply streams in after the
	// tool line.
	b.clickText("a,button,[role=button]", "First session")
	b.waitSelector(30*time.Second, promptInput)
	b.prompt(`call:glob {"pattern":"*.md"} then: listed the markdown files`)
	b.waitText(60*time.Second, "Done. listed the markdown files")
	b.waitText(10*time.Second, "Explored") // the app's line for a glob call: "Explored 1 search"
	b.waitText(10*time.Second, "search")   // (the count is a rolling digit: every digit is in the text)
	b.shot("session")
	if t.Failed() {
		return
	}

	// A permission ask (bash is "ask" in the config): the app shows it,
	// "Allow once" answers it, the command runs.
	b.prompt(`call:bash {"command":"echo perm-$((6*7))","description":"Say the answer"} then: answered`)
	b.waitText(60*time.Second, "Allow once")
	b.shot("permission")
	b.clickText("button", "Allow once")
	b.waitText(60*time.Second, "Done. answered")
	// The shell line is collapsed in the app: its output is in the session.
	ss, err := srv.sessions()
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v %v", ss, err)
	}
	if _, msgs, err := srv.get("/session/"+ss[0].ID+"/message", true); err != nil || !strings.Contains(string(msgs), "perm-42") {
		t.Errorf("the allowed command did not run (no perm-42 in the session): %v", err)
	}

	// The review panel shows the diff of an edit (once /vcs is built).
	if b.gate(srv, "/vcs/diff", "the review panel") {
		file := filepath.Join(dir, "notes.txt")
		b.prompt(`call:write {"filePath":"` + file + `","content":"reviewed-line\n"} then: wrote notes`)
		b.waitText(60*time.Second, "Done. wrote notes")
		b.waitText(30*time.Second, "Changed file")
		b.clickText("button,[role=button],a", "notes.txt", true) // the changed file's row opens its diff
		b.waitText(30*time.Second, "reviewed-line")
		b.shot("review")
	}

	// The terminal runs a command (once /pty is built): echo hi, its
	// output teed to a file so the test sees it ran.
	if b.gate(srv, "/pty", "the terminal") {
		out := filepath.Join(dir, "term.txt")
		b.do("toggle the terminal", chromedp.KeyEvent("`", chromedp.KeyModifiers(chromedp.ModifierCtrl))) // the app's keybind
		b.waitSelector(30*time.Second, `[data-component="terminal"]`)
		b.eval(`new Promise((ok, fail) => { const t0 = Date.now(); (function focus() {
			const t = document.querySelector('[data-component="terminal"]');
			const ta = t && t.querySelector('textarea');
			if (ta) { ta.focus(); ok(true); return }
			if (Date.now() - t0 > 20000) { fail(new Error('no terminal input')); return }
			setTimeout(focus, 100) })() })`)
		// The app made the terminal's PTY: it is listed.
		checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			status, body, err := srv.get("/pty?directory="+url.QueryEscape(dir), true)
			if err != nil || status != 200 || !strings.Contains(string(body), `"id"`) {
				return fmt.Errorf("no PTY listed: %d %s %v", status, body, err)
			}
			return nil
		})
		// Keys typed before the terminal's websocket is connected are lost,
		// and nothing in the page says when it is: the command is typed
		// again until it has run.
		typed := time.Time{}
		checkFor(t, 90*time.Second, 100*time.Millisecond, func() error {
			got, err := os.ReadFile(out)
			if err == nil && string(got) == "hi\n" {
				return nil
			}
			if time.Since(typed) > 2*time.Second {
				b.keys("echo hi | tee " + out + "\r")
				typed = time.Now()
			}
			return fmt.Errorf("the terminal has not run echo hi: %q %v", got, err)
		})
		b.shot("terminal")
	}
	b.check()
}

// chromiumPath finds Debian's chromium (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found in PATH (CI=true: .ci/run installs Debian's chromium)")
	}
	missing(t, "chromium not found in PATH: the web app test drives it (apt-get install chromium)")
	return ""
}

// startWebOrigin starts the real `opencode serve` (which embeds OpenCode's
// web app) isolated on loopback, as the web app's origin only; it is
// stopped when the test ends.
func startWebOrigin(t *testing.T, ocBin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // opencode serve --port 0 takes 4096: give it a free port
	oc := newClient(t, "")
	cmd := exec.Command(ocBin, "serve", "--hostname", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.Dir, cmd.Env = oc.Dir, oc.Env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start opencode serve: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("opencode serve (the web app's origin) output:\n%s", tail(out.String(), 40))
		}
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("opencode serve exited:\n%s", out)
		default:
		}
		resp, err := c.Get(url + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			return fmt.Errorf("GET / of opencode serve: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return nil
	})
	return url
}

// browser is a headless Chromium tab that records what went wrong in the
// page: responses of 400 and more, requests that failed, console errors
// and uncaught exceptions.
type browser struct {
	t     *testing.T
	ctx   context.Context
	dir   string // screenshots
	mu    sync.Mutex
	fails []string
}

func newBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.WindowSize(1400, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	// The whole browser session is bounded: a page that never answers
	// fails the test within minutes instead of holding the suite.
	whole, cancelWhole := context.WithTimeout(context.Background(), 6*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(whole, opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelWhole()
		wg.Wait() // the event loops below end with the tab
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx, dir: screenshotDir(t)}
	responses := chromedp.Events(ctx, network.ResponseReceived)
	failed := chromedp.Events(ctx, network.LoadingFailed)
	console := chromedp.Console(ctx)
	wg.Go(func() {
		for e, err := range responses {
			if err != nil {
				return
			}
			if e.Response.Status >= 400 {
				b.fail("HTTP %d %s", e.Response.Status, e.Response.URL)
			}
		}
	})
	wg.Go(func() {
		for e, err := range failed {
			if err != nil {
				return
			}
			if !e.Canceled { // a stream the page closed on navigation
				b.fail("request failed (%s): %s", e.Type, e.ErrorText)
			}
		}
	})
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == "error" || m.Type == "assert" || m.IsException() {
				b.fail("console %s at %s:%d: %s", m.Type, m.URL, m.Line+1, m)
			}
		}
	})
	return b
}

func (b *browser) fail(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails = append(b.fails, fmt.Sprintf(format, args...))
}

// check fails the test with what went wrong in the page, if anything.
func (b *browser) check() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.fails) > 0 {
		b.t.Errorf("the web app had %d failures:\n  %s", len(b.fails), strings.Join(b.fails, "\n  "))
	}
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed")
		b.check()
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) navigate(url string) { b.t.Helper(); b.do("navigate "+url, chromedp.Navigate(url)) }

// eval runs js in the page, awaiting the promise it may return.
func (b *browser) eval(js string) {
	b.t.Helper()
	b.do("evaluate", chromedp.Evaluate[chromedp.Void](js, chromedp.EvalAwaitPromise))
}

// pageTextJS is the text of the page, inside shadow roots too.
const pageTextJS = `(function text(n) {
	let s = n.innerText || '';
	for (const e of n.querySelectorAll('*')) if (e.shadowRoot) s += '\n' + text(e.shadowRoot);
	return s })(document.body)`

// waitText polls the page until its text contains want.
func (b *browser) waitText(timeout time.Duration, want string) {
	b.t.Helper()
	var last string
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](pageTextJS))
		cancel()
		if err == nil && strings.Contains(s, want) {
			return
		}
		if err == nil {
			last = s
		}
		if time.Now().After(deadline) {
			b.shot("failed")
			b.check()
			b.t.Fatalf("the page does not show %q after %v (err %v); it shows:\n%s", want, timeout, err, tail(last, 60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitSelector polls until an element matches sel.
func (b *browser) waitSelector(timeout time.Duration, sel string) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector(%q)`, sel)))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed")
			b.check()
			b.t.Fatalf("no element %s after %v (err %v)", sel, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clickText clicks the innermost element whose text is text (the last one
// with last), or its closest ancestor matching sel, waiting for it up to
// 20 s.
func (b *browser) clickText(sel, text string, last ...bool) {
	b.t.Helper()
	pick := "find"
	if len(last) > 0 && last[0] {
		pick = "findLast"
	}
	b.eval(fmt.Sprintf(`new Promise((ok, fail) => { const t0 = Date.now(); (function look() {
		const all = [...document.querySelectorAll('*')].filter(e => e.textContent.trim() === %[2]q);
		const inner = all.%[3]s(e => !all.some(o => o !== e && e.contains(o)));
		const el = inner && (inner.closest(%[1]q) || inner);
		if (el) { el.click(); ok(true); return }
		if (Date.now() - t0 > 20000) { fail(new Error('nothing to click: %[1]s with text %[2]s')); return }
		setTimeout(look, 100) })() })`, sel, text, pick))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// keys types s into the focused element.
func (b *browser) keys(s string) {
	b.t.Helper()
	b.do("type", chromedp.KeyEvent(s))
}

// promptInput is the web app's prompt editor.
const promptInput = `[data-component="prompt-input"][contenteditable="true"], [data-component="prompt-input"] [contenteditable="true"]`

// prompt types text into the prompt input and sends it with Enter.
func (b *browser) prompt(text string) {
	b.t.Helper()
	b.do("type the prompt", chromedp.Click(chromedp.CSS(promptInput), chromedp.NodeVisible), chromedp.KeyEvent(text))
	b.do("send the prompt", chromedp.KeyEvent("\r"))
}

// shot saves a screenshot of the page as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if os.Getenv("OPENCODE_E2E_SCREENSHOTS") == "1" && name != "failed" {
		if err := os.WriteFile(filepath.Join("testdata", "screenshots", "webapp-"+name+".png"), png, 0o644); err != nil {
			b.t.Errorf("screenshot %s: %v", name, err)
		}
	}
}

// gate reports whether the step that needs path (a route another change
// builds) can run: the route answers something but the JSON 404 of an
// unknown route. Until it does the step is logged as skipped, and fails
// the test under CI=true.
func (b *browser) gate(srv *server, path, step string) bool {
	b.t.Helper()
	status, body, err := srv.get(path+"?directory="+url.QueryEscape(srv.Dir), true)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	if status != http.StatusNotFound || !strings.Contains(string(body), "No route") {
		return true
	}
	if os.Getenv("CI") == "true" {
		b.t.Errorf("%s: GET %s has no route yet (CI=true: the step must run)", step, path)
	} else {
		b.t.Logf("SKIPPED %s: GET %s has no route yet", step, path)
	}
	return false
}

// screenshotDir is where the screenshots of this run go.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "opencode-e2e-webapp-"+strings.ToLower(randomTag()))
	if a := os.Getenv("OPENCODE_E2E_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "webapp")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", dir)
	return dir
}
