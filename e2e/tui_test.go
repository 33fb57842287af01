package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// tmux drives one tmux server of its own (-L socket name) for a test.
type tmux struct {
	t      *testing.T
	bin    string
	socket string
	conf   string
	env    []string
	target string
}

func newTmux(t *testing.T, env []string) *tmux {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		missing(t, "tmux not found in PATH: the TUI tests run the opencode TUI inside tmux")
	}
	conf := filepath.Join(t.TempDir(), "tmux.conf")
	// remain-on-exit keeps the pane (and what opencode printed) if it dies.
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g history-limit 10000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &tmux{t: t, bin: bin, socket: "oc-e2e-" + strings.ToLower(randomTag()), conf: conf, env: env, target: "e2e"}
}

func (x *tmux) cmd(args ...string) (string, error) {
	cmd := exec.Command(x.bin, append([]string{"-f", x.conf, "-L", x.socket}, args...)...)
	cmd.Env = x.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (x *tmux) must(args ...string) string {
	x.t.Helper()
	out, err := x.cmd(args...)
	if err != nil {
		x.t.Fatal(err)
	}
	return out
}

// start runs argv in a detached 160x45 session and arranges for the tmux
// server and the program to be gone when the test ends.
func (x *tmux) start(dir string, argv ...string) {
	x.t.Helper()
	args := append([]string{"new-session", "-d", "-s", x.target, "-x", "160", "-y", "45", "-c", dir, "--"}, argv...)
	x.must(args...)
	info := strings.Fields(x.must("display-message", "-p", "-t", x.target, "#{pane_pid} #{socket_path}"))
	pid, _ := strconv.Atoi(info[0])
	socketPath := info[len(info)-1]
	x.t.Cleanup(func() {
		if x.t.Failed() {
			if s, err := x.cmd("capture-pane", "-p", "-t", x.target); err == nil {
				x.t.Logf("tmux screen at the end:\n%s", s)
			}
		}
		_, _ = x.cmd("kill-server")
		// tmux leaves the socket file of a killed server behind.
		if filepath.IsAbs(socketPath) && strings.HasSuffix(socketPath, "/"+x.socket) {
			_ = os.Remove(socketPath)
		}
		if pid <= 0 {
			return
		}
		// The pane program gets SIGHUP from kill-server; wait for it so it
		// no longer writes into the test's temp dirs.
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				deadline = time.Now().Add(5 * time.Second)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func (x *tmux) screen() string {
	x.t.Helper()
	return x.must("capture-pane", "-p", "-t", x.target)
}

// waitScreen polls the screen until it contains want.
func (x *tmux) waitScreen(timeout time.Duration, want string) string {
	x.t.Helper()
	var s string
	checkFor(x.t, timeout, 200*time.Millisecond, func() error {
		s = x.screen()
		if strings.Contains(s, want) {
			return nil
		}
		if dead := strings.TrimSpace(x.must("display-message", "-p", "-t", x.target, "#{pane_dead}")); dead == "1" {
			x.t.Fatalf("the program in tmux exited while waiting for %q; screen:\n%s", want, s)
		}
		return fmt.Errorf("screen lacks %q; screen:\n%s", want, s)
	})
	return s
}

// typeLine types text, pauses, then presses Enter.
func (x *tmux) typeLine(text string) {
	x.t.Helper()
	// The TUI must have taken the text before Enter (on a loaded machine
	// an Enter ahead of it was lost): its start shows once more.
	probe := strings.TrimPrefix(text, "!") // "!" turns on shell mode, not shown
	if len(probe) > 20 {
		probe = probe[:20]
	}
	before := strings.Count(x.screen(), probe)
	x.must("send-keys", "-t", x.target, "-l", text)
	checkFor(x.t, 15*time.Second, 50*time.Millisecond, func() error {
		if strings.Count(x.screen(), probe) > before {
			return nil
		}
		return fmt.Errorf("the TUI does not show the typed %q", probe)
	})
	x.must("send-keys", "-t", x.target, "Enter")
}

// startTUI starts `opencode attach` on srv under tmux and waits for its prompt.
func startTUI(t *testing.T, srv *server) *tmux {
	t.Helper()
	oc := newClient(t, srv.Dir)
	x := newTmux(t, oc.Env)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env(1) not found: %v", err)
	}
	// env -i: the program gets exactly the isolated environment, not the
	// tmux server's global one.
	x.start(oc.Dir, append(append([]string{envBin, "-i"}, oc.Env...), oc.bin, "attach", srv.URL)...)
	x.waitScreen(30*time.Second, "Ask anything")
	return x
}

// stubServer starts our server on a tool-calling stub model (prompts script
// it: stubmodel.Directives) with README.md in the project directory.
func stubServer(t *testing.T) *server {
	t.Helper()
	return stubServerWith(t, "")
}

// stubServerWith is stubServer with extra model settings (JSON members
// added to the stub model's config, e.g. a cost table).
func stubServerWith(t *testing.T, modelExtra string) *server {
	t.Helper()
	srv, _ := stubServerModel(t, modelExtra)
	return srv
}

// stubServerModel is stubServerWith that also returns the stub model, whose
// recorded requests show what the server sent the model.
func stubServerModel(t *testing.T, modelExtra string) (*server, *stubmodel.Server) {
	t.Helper()
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(3), stubmodel.WithDelay(30*time.Millisecond))
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	body := `{"model":"stub/stub-model","small_model":"stub/stub-model","provider":{"stub":{"npm":"@ai-sdk/openai-compatible",` +
		`"name":"Stub","options":{"baseURL":"` + stub.URL() + `","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model",` +
		`"tool_call":true,"limit":{"context":128000,"output":4096}` + modelExtra + `}}}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOptions{config: cfg})
	if err := os.WriteFile(filepath.Join(srv.Dir, "README.md"), []byte("# Demo\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, stub
}

// footerRE is the TUI's line under a finished turn: agent, model, duration.
var footerRE = regexp.MustCompile(`Build · Stub Model · [0-9.]+m?s`)

// TestTUIToolTurn: with a model that calls tools, the TUI shows the tool
// line, the next step's text and the duration footer live (it froze at the
// first tool call when our tool events had the wrong shape); bash output
// streams while the command runs; a prompt typed while busy shows at once,
// marked QUEUED, and is answered by the next model call.
func TestTUIToolTurn(t *testing.T) {
	t.Parallel()
	srv := stubServer(t)
	x := startTUI(t, srv)

	x.typeLine(`call:glob {"pattern":"*.md"} then: listed`)
	x.waitScreen(30*time.Second, `Glob "*.md"`)
	x.waitScreen(30*time.Second, "Done. listed")
	checkFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		if s := x.screen(); !footerRE.MatchString(s) {
			return fmt.Errorf("no duration footer; screen:\n%s", s)
		}
		return nil
	})

	// A slow command: its output shows line by line, and a prompt typed
	// meanwhile is queued on screen.
	// (The output words are computed so the prompt on screen lacks them.)
	x.typeLine(`call:bash {"command":"echo out-$((1+1)); sleep 4; echo out-$((2+2))","description":"Slow"} then: counted`)
	x.waitScreen(30*time.Second, "out-2")
	if s := x.screen(); strings.Contains(s, "out-4") {
		t.Fatalf("the whole output arrived at once:\n%s", s)
	}
	queued := "queued while busy " + strings.ToLower(randomTag())
	x.typeLine(queued)
	s := x.waitScreen(10*time.Second, "QUEUED")
	if !strings.Contains(s, queued) {
		t.Errorf("QUEUED shown, but not the prompt %q:\n%s", queued, s)
	}
	// A v1 prompt is a steer: the next model call sees it after the tool
	// result and answers it, as OpenCode's loop does.
	x.waitScreen(30*time.Second, "You said: "+queued)
	x.waitScreen(10*time.Second, "out-4")
	if s := x.screen(); strings.Contains(s, "QUEUED") {
		t.Errorf("still QUEUED after the model answered it:\n%s", s)
	}
}

func TestTUIAttach(t *testing.T) {
	t.Parallel()
	reply := "E2E-TUI-" + randomTag()
	// Slow streaming (20 chunks, 300ms apart: about 6s a turn) leaves time to
	// interrupt the second prompt mid-stream.
	srv := startServer(t, serverOptions{reply: reply, chunks: 20, delay: 300 * time.Millisecond})
	oc := newClient(t, srv.Dir)
	x := newTmux(t, oc.Env)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env(1) not found: %v", err)
	}
	// env -i: the program gets exactly the isolated environment, not the
	// tmux server's global one.
	x.start(oc.Dir, append(append([]string{envBin, "-i"}, oc.Env...), oc.bin, "attach", srv.URL)...)

	x.waitScreen(30*time.Second, "Ask anything")

	// First prompt: the reply streams in and is shown.
	prompt1 := "first tui prompt " + strings.ToLower(randomTag())
	x.typeLine(prompt1)
	x.waitScreen(30*time.Second, reply)

	sessionID := srv.onlySession(t, 5*time.Second)
	checkFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		ms, err := srv.messages(sessionID)
		if err != nil {
			return err
		}
		if n := len(ms); n != 2 || ms[1].Info.Time.Completed == 0 {
			return fmt.Errorf("want a user and a completed assistant message, have %d", n)
		}
		return nil
	})
	checkTurn(t, srv, sessionID, prompt1, reply)

	// Second prompt: interrupt it with Escape twice while it streams.
	prompt2 := "second tui prompt " + strings.ToLower(randomTag())
	x.typeLine(prompt2)
	var streaming message
	checkFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		ms, err := srv.messages(sessionID)
		if err != nil {
			return err
		}
		if len(ms) < 4 {
			return fmt.Errorf("the second turn has not started (%d messages)", len(ms))
		}
		last := ms[len(ms)-1]
		if last.Info.Role != "assistant" || last.Info.Time.Completed != 0 || last.Info.Error != nil {
			return fmt.Errorf("the second turn is not streaming: last message %s %s completed=%d error=%+v text=%q",
				last.Info.Role, last.Info.ID, last.Info.Time.Completed, last.Info.Error, last.text())
		}
		streaming = last
		return nil
	})
	// The TUI learns that the session is busy from events, a little after
	// the server; Escape does nothing before that. It shows "esc interrupt"
	// when busy and "esc again to interrupt" after the first Escape.
	x.waitScreen(10*time.Second, "esc interrupt")
	x.must("send-keys", "-t", x.target, "Escape")
	lastPress, armed := time.Now(), false
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if strings.Contains(x.screen(), "esc again to interrupt") {
			armed = true
			return nil
		}
		if ms, err := srv.messages(sessionID); err == nil && ms[len(ms)-1].Info.Error != nil {
			return nil // two presses already landed
		}
		if time.Since(lastPress) > 1500*time.Millisecond {
			// Not armed (the key was lost or the hint timed out): press again.
			x.must("send-keys", "-t", x.target, "Escape")
			lastPress = time.Now()
		}
		return errors.New(`no "esc again to interrupt" after Escape`)
	})
	if armed {
		x.must("send-keys", "-t", x.target, "Escape")
	}

	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		ms, err := srv.messages(sessionID)
		if err != nil {
			return err
		}
		last := ms[len(ms)-1]
		if last.Info.Role != "assistant" || last.Info.Error == nil {
			return fmt.Errorf("last message (%s, %s) has no error yet", last.Info.Role, last.Info.ID)
		}
		if last.Info.ID != streaming.Info.ID {
			return fmt.Errorf("last assistant message is %s, the interrupted one was %s", last.Info.ID, streaming.Info.ID)
		}
		if last.Info.Error.Name != "MessageAbortedError" {
			return fmt.Errorf("last assistant message error %+v, want MessageAbortedError", last.Info.Error)
		}
		if last.text() == reply {
			return fmt.Errorf("the interrupted message has the whole reply %q: the abort came too late", reply)
		}
		return nil
	})
	x.waitScreen(10*time.Second, "interrupted")
	if got := srv.stderr.String(); strings.Contains(got, "level=ERROR") {
		t.Logf("server logged errors:\n%s", got)
	}
}

// TestTUICommands: the TUI's own commands work against our server as
// against opencode serve: `!cmd` shows the command's output, /undo removes
// the turn and the file it wrote (/redo brings both back), `@READ` offers
// README.md, /compact summarizes.
func TestTUICommands(t *testing.T) {
	t.Parallel()
	srv := stubServer(t)
	// A git project: undo restores files from per-step snapshots, which
	// are taken in git work trees only (as in OpenCode).
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = srv.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	x := startTUI(t, srv)

	x.typeLine("!echo shell-$((40+2))")
	x.waitScreen(30*time.Second, "shell-42")

	file := filepath.Join(srv.Dir, "undo-me.txt")
	x.typeLine(`call:write {"filePath":"` + file + `","content":"x\n"} then: wrote`)
	x.waitScreen(30*time.Second, "Done. wrote")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the write tool did not write: %v", err)
	}
	x.typeLine("/undo")
	x.waitScreen(15*time.Second, "message reverted")
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if _, err := os.Stat(file); err == nil {
			return errors.New("/undo left the written file in place")
		}
		return nil
	})
	// /undo puts the prompt back in the input; clear it, then /redo. The
	// keys are paced: nothing on the screen tells for sure that the TUI
	// has taken one.
	time.Sleep(300 * time.Millisecond)
	x.must("send-keys", "-t", x.target, "C-u")
	time.Sleep(300 * time.Millisecond)
	x.typeLine("/redo")
	checkFor(t, 15*time.Second, 100*time.Millisecond, func() error {
		if _, err := os.Stat(file); err != nil {
			return errors.New("/redo did not bring the file back")
		}
		return nil
	})
	x.waitScreen(10*time.Second, "Done. wrote")

	x.must("send-keys", "-t", x.target, "-l", "look at @READ")
	x.waitScreen(15*time.Second, "README.md")
	// Close the picker, then clear the input (the TUI needs a moment for
	// each key).
	x.must("send-keys", "-t", x.target, "Escape")
	time.Sleep(300 * time.Millisecond) // no sign on the screen that the key was taken: pace the next one
	x.must("send-keys", "-t", x.target, "C-u")
	checkFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		if s := x.screen(); strings.Contains(s, "look at @READ") {
			return fmt.Errorf("the input was not cleared:\n%s", s)
		}
		return nil
	})

	x.typeLine("/compact")
	x.waitScreen(30*time.Second, "Compaction · Stub Model")
}

// TestTUIAgentWork: what the TUI shows of the agent's work, from our
// events: the todo list todowrite keeps, a subagent's task (and the
// child session's tool calls), and the session's tokens and cost.
func TestTUIAgentWork(t *testing.T) {
	t.Parallel()
	srv := stubServerWith(t, `,"cost":{"input":150,"output":600}`)
	x := startTUI(t, srv)

	x.typeLine(`call:todowrite {"todos":[{"content":"Write the parser","status":"in_progress","priority":"high"},{"content":"Ship the release","status":"pending","priority":"low"}]} then: planned`)
	x.waitScreen(30*time.Second, "Done. planned")
	s := x.waitScreen(10*time.Second, "Write the parser")
	if !strings.Contains(s, "Ship the release") {
		t.Errorf("the todo list lacks its second item:\n%s", s)
	}

	x.typeLine(`call:task {"description":"Scan the files","prompt":"call:glob {\"pattern\":\"*.md\"} then: scanned","subagent_type":"explore"} then: delegated`)
	x.waitScreen(30*time.Second, "Done. delegated")
	s = x.waitScreen(10*time.Second, "Explore Task")
	if !strings.Contains(s, "Scan the files") {
		t.Errorf("the task line lacks its description:\n%s", s)
	}
	// The subagent's own tool call, counted from the child session.
	x.waitScreen(10*time.Second, "1 toolcall")
	// Tokens and cost, added up from the assistant messages (the sidebar's
	// "Context … tokens … $… spent").
	s = x.waitScreen(10*time.Second, " spent")
	if !regexp.MustCompile(`[0-9,]+ tokens`).MatchString(s) || !regexp.MustCompile(`\$[0-9]+\.[0-9]{2} spent`).MatchString(s) {
		t.Errorf("no token and cost figures:\n%s", s)
	}
}
