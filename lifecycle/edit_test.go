package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestEditConversation: a part edited with PATCH and a message deleted
// are what the model is sent next (the runner reads the conversation
// again); deleting what is gone answers true, as OpenCode does; an edit
// while a turn runs is refused with OpenCode's SessionBusyError; a part
// whose IDs do not match the path is a 400.
func TestEditConversation(t *testing.T) {
	model := scripted.New(scripted.Config{Record: true, Chunks: 2})
	hold := &holding{Provider: model, release: make(chan struct{})}
	srv := testserver.Start(t, testserver.Options{Provider: hold})
	c := newClient(t, srv)
	sid := c.newSession()
	first, second := newID(), newID()
	c.must("POST", "/session/"+sid+"/message", v1Body(first, "alpha", ""), 200)
	c.must("POST", "/session/"+sid+"/message", v1Body(second, "beta", ""), 200)

	var firstPart v1Part
	var secondReply string
	for _, m := range c.messages(sid) {
		if m.Info.ID == first {
			firstPart = m.Parts[0]
		}
		if m.Info.ParentID == second {
			secondReply = m.Info.ID
		}
	}
	edited := map[string]any{"id": firstPart.ID, "sessionID": sid, "messageID": first, "type": "text", "text": "ALPHA"}
	var out v1Part
	c.must("PATCH", "/session/"+sid+"/message/"+first+"/part/"+firstPart.ID, edited, 200).json(t, &out)
	if out.Text != "ALPHA" || out.ID != firstPart.ID {
		t.Errorf("PATCH answered %+v", out)
	}
	mismatch := map[string]any{"id": firstPart.ID, "sessionID": sid, "messageID": second, "type": "text", "text": "x"}
	c.must("PATCH", "/session/"+sid+"/message/"+first+"/part/"+firstPart.ID, mismatch, 400)
	gone := "msg_0000000000000000000000000"
	orphan := map[string]any{"id": firstPart.ID, "sessionID": sid, "messageID": gone, "type": "text", "text": "x"}
	c.must("PATCH", "/session/"+sid+"/message/"+gone+"/part/"+firstPart.ID, orphan, 404)

	c.must("DELETE", "/session/"+sid+"/message/"+second, nil, 200)
	c.must("DELETE", "/session/"+sid+"/message/"+secondReply, nil, 200)
	c.must("DELETE", "/session/"+sid+"/message/"+second, nil, 200) // gone: still true

	c.must("POST", "/session/"+sid+"/message", v1Body(newID(), "gamma", ""), 200)
	calls := model.Calls()
	if got := userTexts(calls[len(calls)-1]); !slices.Equal(got, []string{"ALPHA", "gamma"}) {
		t.Errorf("the model was sent the user messages %q, want the edited first and the new one", got)
	}
	for _, m := range c.messages(sid) {
		if m.Info.ID == second || m.Info.ID == secondReply {
			t.Errorf("deleted message %s is still listed", m.Info.ID)
		}
	}

	// While a turn runs the conversation is the runner's.
	busy := newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(busy, "hold", ""), 204)
	checkFor(t, 5*time.Second, "the turn to start", func() bool {
		var st map[string]struct{ Type string }
		c.must("GET", "/session/status", nil, 200).json(t, &st)
		return st[sid].Type == "busy"
	})
	var be struct {
		Tag       string `json:"_tag"`
		SessionID string `json:"sessionID"`
		Message   string `json:"message"`
	}
	c.must("DELETE", "/session/"+sid+"/message/"+first, nil, 409).json(t, &be)
	if be.Tag != "SessionBusyError" || be.SessionID != sid || be.Message != "Session is busy: "+sid {
		t.Errorf("busy answer %+v", be)
	}
	close(hold.release)
	c.waitIdle(sid)
}

// holding is a model that holds a prompt "hold" until release is closed.
type holding struct {
	provider.Provider
	release chan struct{}
}

func (h *holding) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	if req.Purpose != provider.PurposeTitle && lastUser(req) == "hold" {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Provider.Stream(ctx, req, emit)
}
