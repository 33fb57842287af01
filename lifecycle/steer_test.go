package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// TestSteerIntoExternal: SteerInto aims a steer at the running turn of an
// external agent's prompt: an agent that advertises steering takes it
// (admitted, and delivered into the turn), one that does not is refused
// SteerUnsupported with nothing admitted (the OpenAI door's
// steering_not_supported); a steer aimed at a message that is not the
// running turn's is refused too.
func TestSteerIntoExternal(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want opencode.SteerRefusal
	}{
		{"steering agent", steeringStub, ""},
		{"no steering", nil, opencode.SteerUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := externalServerEnv(t, "", tc.env)
			sid := c.newSession()
			startSteered(t, srv, c, sid)
			prompt := c.messages(sid)[0].Info.ID
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			steer := func(into string) (*opencode.Input, opencode.SteerRefusal) {
				t.Helper()
				in := &opencode.Input{ID: identifier.NewMessage(), SessionID: sid, Minted: true,
					Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "turn left"}}}
				out, _, refused, err := srv.Manager.SteerInto(ctx, in, into)
				if err != nil {
					t.Fatalf("SteerInto: %v", err)
				}
				return out, refused
			}
			if _, refused := steer(identifier.NewMessage()); refused != opencode.SteerTurnOver {
				t.Errorf("a steer aimed at no message of the turn: %q, want %q", refused, opencode.SteerTurnOver)
			}
			out, refused := steer(prompt)
			if refused != tc.want || (refused == "") != (out != nil) {
				t.Fatalf("SteerInto the prompt's turn: %q (%v), want %q", refused, out, tc.want)
			}
			if refused != "" {
				if got := c.inboxIDs("/api/session/" + sid + "/inbox"); len(got) != 0 {
					t.Errorf("a refused steer left %v in the inbox", got)
				}
				release(t, srv)
				c.settled(sid, []string{"user:" + c.messages(sid)[0].text(), "assistant:before. ended"})
				return
			}
			c.settled(sid, []string{"user:" + c.messages(sid)[0].text(), "assistant:before.", "user:turn left", "assistant:after: turn left"})
		})
	}
}
