package lifecycle

import (
	"strings"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// requestTitle asks the small model for the session's title, as OpenCode
// does on the first prompt of a root session, alongside the turn's first
// model call: the title prompt as system (with the prompt's own system
// text), then the question and the first message (all its parts) as user
// messages. The answer comes back to the runner (applyTitle).
func (r *runner) requestTitle(first provider.Message, userSystem string, turnModel opencode.MessageModel) {
	model := r.m.smallModel(turnModel)
	system := agent.TitlePrompt
	if userSystem != "" {
		system += "\n\n" + userSystem
	}
	req := provider.Request{SessionID: r.id, ModelID: model.ModelID, System: system, Purpose: provider.PurposeTitle,
		Messages: []provider.Message{{Role: "user", Content: agent.TitleQuestion}, first}}
	r.m.modelOptions(&req, model)
	// The first message whole, as the turn's model call gets it (files
	// the small model cannot read as OpenCode's error text).
	req.Messages[1].Memo = nil
	if mediaParts(first.Parts) > 0 {
		req.Messages = r.m.unsupportedParts(req.Messages, model)
	}
	prov := r.m.providerFor(model)
	r.titling = true
	// The request goes out once the prompt that asks for it is stored,
	// and only while this instance owns the session: a failed commit or a
	// lost lease asks the model nothing.
	r.outbox().then(func(int64) {
		if !r.owned() {
			r.titling = false
			return
		}
		r.m.wg.Add(1)
		go func() {
			defer r.m.wg.Done()
			var b strings.Builder
			err := prov.Stream(r.m.ctx, req, func(c provider.Chunk) {
				if c.Kind == provider.TextDelta {
					b.WriteString(c.Text)
				}
			})
			title := ""
			if err == nil {
				title = cleanTitle(b.String())
			} else {
				r.m.log.Warn("title request failed", "session", r.id, "err", err)
			}
			r.post(streamMsg{title: &title})
		}()
	})
}

// applyTitle takes the small model's title, unless the session was named
// meanwhile (or the request failed: the default title stays, as in
// OpenCode). The title does not count as an update of the session.
func (r *runner) applyTitle(title string) {
	r.titling = false
	if title == "" || !strings.HasPrefix(r.sess.Title, defaultTitlePrefix) {
		return
	}
	s := r.sess
	s.Title = title
	r.outbox().session(s)
	r.sess = s
}

// cleanTitle is the title in a model's answer: reasoning in <think> tags
// dropped, the first non-empty line, at most 100 characters.
func cleanTitle(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			s = s[:i]
			break
		}
		s = s[:i] + s[i+j+len("</think>"):]
	}
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if len([]rune(line)) > 100 {
				line = string([]rune(line)[:97]) + "..."
			}
			return line
		}
	}
	return ""
}
