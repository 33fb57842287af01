package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/acp"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// brokenWriter fails every write, as stdout does once the client is gone.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestWriteFailureEndsConnection: a failed write to the client ends the
// connection (Serve returns the error) while the client's input is still
// open, as a failed commit stops a session.
func TestWriteFailureEndsConnection(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	before := acp.Goroutines()
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() {
		done <- acp.Serve(context.Background(), inR, brokenWriter{}, acp.Options{Core: srv.Manager, Directory: srv.Directory})
	}()
	go func() {
		_, _ = inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"t","version":"1"}}}` + "\n"))
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("Serve returned %v, want the write error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection lives on after a failed write")
	}
	acp.NoneLeft(t, before)
}

// TestCloseStopsAsk: session/close stops our permission ask of that
// session (its goroutine ends) though the client never answers it; the
// core's ask stays for another client.
func TestCloseStopsAsk(t *testing.T) {
	srv, file := askingServer(t)
	c := start(t, srv)
	asked := make(chan struct{}, 1)
	c.onAsk = func(json.RawMessage) any {
		asked <- struct{}{}
		return nil // never answered
	}
	c.handshake()
	sid := c.newSession(srv.Directory)
	c.request("session/prompt", map[string]any{"sessionId": sid,
		"prompt": textPrompt(`call:edit {"filePath":"` + file + `","oldString":"one","newString":"two"} then: edited`)})
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("no permission ask")
	}
	c.call("session/close", map[string]any{"sessionId": sid}, nil)
	c.waitFor("the ask's goroutine to end", func() bool { return acp.Askers() == 0 })
	if err := srv.Manager.Abort(context.Background(), sid); err != nil {
		t.Fatal(err)
	}
}
