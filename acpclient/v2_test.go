package acpclient_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/opencode-server/opencode-server/acpclient"
)

// TestInitializeResponseV2: a v2 initialize answer's prompt capabilities
// are offered by an object (absent, null or false: not), and steering by
// session.inject's modes naming steer.
func TestInitializeResponseV2(t *testing.T) {
	for _, tc := range []struct {
		name, answer            string
		image, embedded, steers bool
	}{
		{"nothing", `{"protocolVersion":2,"capabilities":{}}`, false, false, false},
		{"prompt objects", `{"protocolVersion":2,"capabilities":{"session":{"prompt":{"image":{},"embeddedContext":{}}}}}`, true, true, false},
		{"null and false", `{"protocolVersion":2,"capabilities":{"session":{"prompt":{"image":null,"embeddedContext":false}}}}`, false, false, false},
		{"inject steer", `{"protocolVersion":2,"capabilities":{"session":{"inject":{"modes":["queue","steer"]}}}}`, false, false, true},
		{"inject queue only", `{"protocolVersion":2,"capabilities":{"session":{"inject":{"modes":["queue"]}}}}`, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r acpclient.InitializeResponseV2
			if err := json.Unmarshal([]byte(tc.answer), &r); err != nil {
				t.Fatal(err)
			}
			p := r.PromptCapabilities()
			if p.Image != tc.image || p.EmbeddedContext != tc.embedded || r.Steers() != tc.steers {
				t.Errorf("image %v, embeddedContext %v, steers %v; want %v %v %v", p.Image, p.EmbeddedContext, r.Steers(),
					tc.image, tc.embedded, tc.steers)
			}
		})
	}
}

// TestInjectReason: data.reason of an inject refusal (-32010, or -32002
// for an unknown ID), also wrapped; "" for anything else.
func TestInjectReason(t *testing.T) {
	refusal := func(code int, reason string) error {
		return &acpclient.RPCError{Code: code, Message: "no", Data: json.RawMessage(`{"reason":"` + reason + `"}`)}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no running turn", refusal(acpclient.CodeInjectRefused, acpclient.ReasonNoRunningTurn), acpclient.ReasonNoRunningTurn},
		{"wrapped", fmt.Errorf("inject: %w", refusal(acpclient.CodeInjectRefused, acpclient.ReasonAlreadyDelivered)), acpclient.ReasonAlreadyDelivered},
		{"unknown ID", refusal(-32002, "unknown_message_id"), "unknown_message_id"},
		{"another code", refusal(acpclient.CodeInternal, acpclient.ReasonNoRunningTurn), ""},
		{"not RPC", errors.New("closed"), ""},
		{"nil", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := acpclient.InjectReason(tc.err); got != tc.want {
				t.Errorf("InjectReason = %q, want %q", got, tc.want)
			}
		})
	}
}
