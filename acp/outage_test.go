package acp_test

import (
	"encoding/json"
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestPromptStoreOutage: a prompt whose admission cannot read the store
// (its input reads time out) is answered as HTTP answers it: the
// retryable unavailable error (-32001, data.retryable and retryAfter), not
// an internal one. The core let this read's error out raw, which ACP
// answered -32603.
func TestPromptStoreOutage(t *testing.T) {
	st := &storetest.Failing{}
	srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { st.Store = s; return st }})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	st.SetInputsDown(true)
	// With the client's message ID: its admission must read the store (an
	// earlier admission of that ID?), which the outage fails. (A minted ID
	// reads nothing: whether a read came after depended on timing.)
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("during the outage"),
		"_meta": map[string]any{"messageId": identifier.NewMessage()}})
	m := c.wait(ch, "session/prompt")
	st.SetInputsDown(false)
	if m.Error == nil || m.Error.Code != opencode.KindOf(opencode.EUnavailable).RPC {
		t.Fatalf("prompt during an outage: %+v, want error %d", m.Error, opencode.KindOf(opencode.EUnavailable).RPC)
	}
	var data struct {
		Retryable  bool `json:"retryable"`
		RetryAfter int  `json:"retryAfter"`
	}
	if err := json.Unmarshal(m.Error.Data, &data); err != nil || !data.Retryable || data.RetryAfter < 1 {
		t.Errorf("error data %s (%v), want retryable with a retryAfter", m.Error.Data, err)
	}
	// Once the store answers again, the same prompt goes through.
	_, ch = c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("after it")})
	if r := decodeReply(t, c.wait(ch, "session/prompt")); r.StopReason != "end_turn" {
		t.Errorf("prompt after the outage: %+v", r)
	}
}
