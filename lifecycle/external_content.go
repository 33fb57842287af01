package lifecycle

import (
	"slices"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/tool"
)

// What an external agent's tool call shows beyond its text: the terminals
// it embeds ({type:"terminal"}: their output is the call's output, read
// again at each update of it) and the diffs it carries ({type:"diff"}:
// the tool part's metadata has them as our edit and write tools' have
// theirs, so a client shows the change). Each update may name only some
// of them, so they are kept per call for the turn.

// extCall is what a tool call's content named so far.
type extCall struct {
	terms []string
	// diffs by path, in the order they came (paths).
	diffs map[string]acpclient.ToolCallContent
	paths []string
}

// diffMax bounds the text of a diff computed on the loop: a larger one
// is shown by its path alone.
const diffMax = 256 << 10

// extCallOf records tc's content and returns what its call holds.
func (r *runner) extCallOf(tc *acpclient.ToolCall) *extCall {
	x := r.turn.ext
	if x == nil {
		return nil
	}
	if x.calls == nil {
		x.calls = map[string]*extCall{}
	}
	ec := x.calls[tc.ToolCallID]
	if ec == nil {
		ec = &extCall{diffs: map[string]acpclient.ToolCallContent{}}
		x.calls[tc.ToolCallID] = ec
	}
	for _, c := range tc.Content {
		switch {
		case c.Type == "terminal" && c.TerminalID != "":
			if !slices.Contains(ec.terms, c.TerminalID) {
				ec.terms = append(ec.terms, c.TerminalID)
				r.extWatch(tc.ToolCallID, c.TerminalID)
			}
		case c.Type == "diff" && c.Path != "":
			if _, ok := ec.diffs[c.Path]; !ok {
				ec.paths = append(ec.paths, c.Path)
			}
			ec.diffs[c.Path] = c
		}
	}
	return ec
}

// extToolOutput is the output of the agent's tool call: its content's
// text (toolText), then what the terminals it embeds printed so far (a
// terminal the agent released shows its last output).
func (r *runner) extToolOutput(tc *acpclient.ToolCall) string {
	out := toolText(tc)
	ec := r.extCallOf(tc)
	if ec == nil || r.turn.ext.proc == nil {
		return out
	}
	for _, id := range ec.terms {
		if s, ok := r.turn.ext.proc.terms.output(id); ok && s != "" {
			if out != "" && !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			out += s
		}
	}
	return out
}

// extToolMeta is the tool part's metadata for the diffs call holds (nil
// for none): as our edit tool's, the unified diff (the files', one after
// the other), the first file's path and the lines added and deleted.
func (r *runner) extToolMeta(call string) map[string]any {
	x := r.turn.ext
	if x == nil || x.calls[call] == nil || len(x.calls[call].paths) == 0 {
		return nil
	}
	ec := x.calls[call]
	var diffs []string
	adds, dels := 0, 0
	for _, p := range ec.paths {
		d := ec.diffs[p]
		old := ""
		if d.OldText != nil {
			old = *d.OldText
		}
		if len(old)+len(d.NewText) > diffMax {
			diffs = append(diffs, "--- "+p+"\n+++ "+p+"\n(too large to show)\n")
			continue
		}
		diff, a, del := tool.FilePatch(p, old, d.NewText)
		diffs = append(diffs, diff)
		adds, dels = adds+a, dels+del
	}
	first := ec.paths[0]
	return map[string]any{"filepath": first, "diff": strings.Join(diffs, "\n"), "additions": adds, "deletions": dels,
		"filediff": map[string]any{"file": first, "additions": adds, "deletions": dels}}
}

// termWatch is how often a running terminal's new output is put into the
// tool call that embeds it.
const termWatch = 100 * time.Millisecond

// extWatch puts what terminal id prints into tool call call while it
// runs, as our bash tool reports its output: at most every termWatch, the
// runner reads the call's output again (extRefresh). It ends with the
// command or the turn.
func (r *runner) extWatch(call, id string) {
	tu := r.turn
	if tu.ext.proc == nil {
		return
	}
	t := tu.ext.proc.terms.get(id)
	if t == nil {
		return
	}
	r.m.wg.Go(func() {
		tick := time.NewTicker(termWatch)
		defer tick.Stop()
		seen := t.out.count()
		update := func() {
			if n := t.out.count(); n != seen {
				seen = n
				r.post(streamMsg{then: func() { r.extRefresh(tu, call) }})
			}
		}
		for {
			select {
			case <-tick.C:
				update()
			case <-t.exited:
				update()
				return
			case <-tu.ctx.Done():
				return
			}
		}
	})
}

// extRefresh shows tool call call's output anew, if the call still runs
// in the current message and nothing of the agent's is held (what is
// held comes first; the call's next update reads the output anyway).
func (r *runner) extRefresh(tu *turn, call string) {
	if r.turn != tu || tu.step == nil || tu.step.measuring || len(tu.ext.sending) > 0 || len(tu.ext.buffered) > 0 {
		return
	}
	if c := tu.step.call(call); c == nil || c.done {
		return
	}
	r.extTool(tu.step, &acpclient.ToolCall{ToolCallID: call})
}
