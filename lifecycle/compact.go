package lifecycle

import (
	"context"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// compactionAgent names the summary message's agent and mode, as OpenCode's.
const compactionAgent = "compaction"

// compactionQuestion stands for the compaction request in the model's
// view after a summary: the summary answers it.
const compactionQuestion = "What did we do so far?"

// isCompaction reports whether a stored message is a compaction request.
func isCompaction(mp opencode.MessageWithParts) bool {
	if mp.Info.Role != opencode.User {
		return false
	}
	for _, p := range mp.Parts {
		if p.Type == opencode.PartCompaction {
			return true
		}
	}
	return false
}

// transcript renders the model's view of the conversation as text for the
// summarizer: who said what, tool calls and their results.
func transcript(history []provider.Message) string {
	var b strings.Builder
	for _, m := range history {
		switch m.Role {
		case "user":
			b.WriteString("[User]: " + m.Texts() + "\n\n")
		case "assistant":
			if t := m.Texts(); t != "" {
				b.WriteString("[Assistant]: " + t + "\n\n")
			}
			for _, c := range m.ToolCalls {
				b.WriteString("[Assistant tool call]: " + c.Name + "(" + string(c.Arguments) + ")\n")
			}
		case "tool":
			b.WriteString("[Tool result]: " + m.Content + "\n\n")
		}
	}
	return strings.TrimSpace(b.String())
}

// compactionRequest asks the model for a summary another agent can
// continue from.
func compactionRequest(sessionID, modelID, conversation string) provider.Request {
	return provider.Request{SessionID: sessionID, ModelID: modelID, System: compactionSystem,
		Messages: []provider.Message{{Role: "user", Memo: &provider.Memo{},
			Content: "Here is the conversation so far:\n\n<conversation>\n" + conversation + "\n</conversation>\n\n" + compactionPrompt}}}
}

const compactionSystem = "You summarize coding sessions so that another coding agent can take over the work without the conversation."

const compactionPrompt = `Write a summary of the conversation above for the agent that continues this work. Use exactly these Markdown sections, in this order, each one kept even when empty ("(none)"):

## Objective
What the user wants, in one or two sentences.

## Important Details
Constraints, preferences, decisions with their reasons, and facts the next agent needs.

## Work State
### Completed
### Active
### Blocked

## Next Move
The next concrete steps, numbered.

## Relevant Files
Each path that matters, with why.

Be terse: bullets, not paragraphs. Keep exact file paths, symbols, commands, error messages and identifiers. Do not mention that this is a summary.`

// overflow reports whether a step's usage nears the model's context limit,
// as OpenCode judges it: the tokens the step saw and wrote (input, cache
// reads, output) beyond the context less the room kept for an answer.
// Models with no configured context limit never overflow.
func (m *Manager) overflow(model opencode.MessageModel, u provider.Usage) bool {
	info, ok := m.modelInfo(model)
	if !ok || info.Context <= 0 {
		return false
	}
	limit := info.Context
	reserve := int64(maxOutput)
	if out := int64(m.maxTokens(model)); out > 0 {
		reserve = out
	}
	usable := limit - reserve
	// Input is the whole prompt, its cached part included.
	return usable > 0 && u.Input+u.Output > usable
}

// autoCompact queues a compaction (auto: true) ahead of the other queued
// inputs, in the commit that ends the turn that overflowed: the next turn
// summarizes the conversation, and later model calls start from the
// summary instead of the whole history.
func (r *runner) autoCompact(t *outbox, model opencode.MessageModel) {
	in := opencode.CompactInput(r.id, r.m.ids.NewMessage(), r.m.ids.NewPart(), &model, true)
	in.Minted = true
	if _, _, err := r.admit(in); err != nil {
		r.m.log.Warn("automatic compaction not queued", "session", r.id, "err", err)
		return
	}
	// admit appended it; it goes first of the queued inputs.
	n := len(r.pending) - 1
	first := slices.IndexFunc(r.pending, func(p *opencode.Input) bool { return p.Delivery == opencode.Queue })
	if first >= 0 && first < n {
		c := r.pending[n]
		copy(r.pending[first+1:], r.pending[first:n])
		r.pending[first] = c
	}
}

// prunedOutput stands for a tool output pruned from the model's view.
const prunedOutput = "[Old tool result content cleared]"

// Pruning thresholds, OpenCode's (in estimated tokens: 4 bytes each): the
// newest 40,000 tokens of tool output stay; older outputs are pruned only
// when that frees at least 20,000.
const (
	pruneProtect = 40_000
	pruneMinimum = 20_000
)

// toolRef is a completed tool output in the model's view: its part, its
// place in the history, the user turn it belongs to and its size.
type toolRef struct {
	messageID, partID string
	hist, turn        int
	tokens            int
}

// prune clears old tool outputs from the model's view as OpenCode prunes
// them after a turn: outputs of the last two user turns are kept, then the
// newest 40,000 tokens; older ones go if that frees 20,000 or more. A pruned
// part keeps its output but gets time.compacted, stored with the turn's
// end, so a restart prunes the same.
func (r *runner) prune(t *outbox) {
	var total, freed int
	var cut []int // indexes in r.toolOutputs
	for i := len(r.toolOutputs) - 1; i >= 0; i-- {
		ref := r.toolOutputs[i]
		if ref.turn > r.userTurns-2 {
			continue
		}
		total += ref.tokens
		if total > pruneProtect {
			freed += ref.tokens
			cut = append(cut, i)
		}
	}
	if freed < pruneMinimum {
		return
	}
	now := r.m.now()
	// A fresh array: a model call that was cancelled may still read the old.
	r.history = slices.Clone(r.history)
	drop := map[int]bool{}
	for _, i := range cut {
		ref := r.toolOutputs[i]
		drop[i] = true
		if ref.hist < len(r.history) {
			m := r.history[ref.hist]
			m.Content, m.Memo = prunedOutput, &provider.Memo{}
			r.history[ref.hist] = m
		}
		mp, err := r.m.store.GetMessage(context.Background(), r.id, ref.messageID)
		if err != nil {
			continue
		}
		for _, p := range mp.Parts {
			if p.ID == ref.partID && p.State != nil && p.State.Time != nil {
				st := *p.State
				tt := *st.Time
				tt.Compacted = &now
				st.Time = &tt
				p.State = &st
				t.part(p, now)
			}
		}
	}
	kept := r.toolOutputs[:0]
	for i, ref := range r.toolOutputs {
		if !drop[i] {
			kept = append(kept, ref)
		}
	}
	r.toolOutputs = kept
}
