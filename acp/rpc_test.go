package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// pipeConn runs a conn on pipes with handler h; lines written by the
// agent come out of the returned channel.
func pipeConn(t *testing.T, h handler, opts ...func(*conn)) (*conn, io.WriteCloser, <-chan string) {
	t.Helper()
	before := Goroutines()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := newConn(inR, outW, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, o := range opts {
		o(c)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = c.serve(context.Background())
		outW.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { inW.Close(); <-served; NoneLeft(t, before) })
	return c, inW, lines
}

func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no line within 30s")
	}
	return ""
}

// TestCodec: the JSON-RPC framing: bad lines get errors and the
// connection lives on; requests get one reply each, with their ID as sent
// (numbers and strings); notifications none; our own calls get the
// client's response; a later runs after its handler returned, without
// holding up the next request.
func TestCodec(t *testing.T) {
	release := make(chan struct{})
	h := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "echo":
			return json.RawMessage(params), nil
		case "slow":
			return later(func() (any, error) { <-release; return map[string]bool{"slow": true}, nil }), nil
		case "note":
			return nil, nil
		}
		return nil, &rpcError{Code: codeMethodNotFound, Message: "no " + method}
	}
	c, in, lines := pipeConn(t, h)
	write := func(s string) { _, _ = in.Write([]byte(s + "\n")) }
	for _, tc := range []struct{ send, want string }{
		{`not json`, `"code":-32700`},
		{`{"jsonrpc":"2.0","result":{}}`, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}}`, `{"jsonrpc":"2.0","id":7,"result":{"a":1}}`},
		{`{"jsonrpc":"2.0","id":"s-1","method":"echo","params":[1]}`, `{"jsonrpc":"2.0","id":"s-1","result":[1]}`},
		{`{"jsonrpc":"2.0","id":8,"method":"nope"}`, `"code":-32601`},
		// JSON-RPC ids are strings, numbers or null; others are refused,
		// not echoed.
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"echo","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":[1],"method":"echo","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":true,"method":"echo","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":-2.5,"method":"echo","params":{}}`, `{"jsonrpc":"2.0","id":-2.5,"result":{}}`},
	} {
		write(tc.send)
		if got := next(t, lines); !strings.Contains(got, tc.want) {
			t.Errorf("%s -> %s, want %s", tc.send, got, tc.want)
		}
	}
	// A notification gets no reply; a slow request does not hold up the next.
	write(`{"jsonrpc":"2.0","method":"note"}`)
	write(`{"jsonrpc":"2.0","id":9,"method":"slow"}`)
	write(`{"jsonrpc":"2.0","id":10,"method":"echo","params":{}}`)
	if got := next(t, lines); !strings.Contains(got, `"id":10`) {
		t.Fatalf("after a slow request, got %s, want the echo's reply first", got)
	}
	close(release)
	if got := next(t, lines); !strings.Contains(got, `"id":9`) || !strings.Contains(got, `"slow":true`) {
		t.Fatalf("slow reply: %s", got)
	}
	// Our call to the client, answered.
	res := make(chan string, 1)
	go func() {
		r, err := c.call(context.Background(), "session/request_permission", map[string]any{"x": 1})
		if err != nil {
			res <- "error: " + err.Error()
			return
		}
		res <- string(r)
	}()
	call := next(t, lines)
	var f frame
	if err := json.Unmarshal([]byte(call), &f); err != nil || f.Method != "session/request_permission" {
		t.Fatalf("call frame %s", call)
	}
	write(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"ok":true}}`)
	if got := <-res; got != `{"ok":true}` {
		t.Errorf("call result %s", got)
	}
	// A call we stop waiting for is cancelled at the client.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, err := c.call(ctx, "session/request_permission", nil); res <- err.Error() }()
	next(t, lines)
	cancel()
	if got := next(t, lines); !strings.Contains(got, `"method":"$/cancel_request"`) {
		t.Errorf("after a cancelled call: %s, want $/cancel_request", got)
	}
	<-res
}

// TestLineLimit: a line over the limit gets an error reply and is
// dropped; the connection goes on answering.
func TestLineLimit(t *testing.T) {
	h := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return json.RawMessage(params), nil
	}
	if maxLine < 1<<20 {
		t.Fatalf("maxLine is %d: a prompt with an embedded file needs more", maxLine)
	}
	// The limit's logic, without 64 MiB through a pipe under -race.
	const limit = 1 << 20
	_, in, lines := pipeConn(t, h, func(c *conn) { c.maxLine = limit })
	go func() {
		big := bytes.Repeat([]byte("x"), limit+10)
		_, _ = in.Write(append(big, '\n'))
		_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"ok":1}}` + "\n"))
	}()
	if got := next(t, lines); !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "too large") {
		t.Errorf("over the limit: %s", got)
	}
	if got := next(t, lines); got != `{"jsonrpc":"2.0","id":1,"result":{"ok":1}}` {
		t.Errorf("after the long line: %s", got)
	}
}

// FuzzConn: any input line leaves the connection alive and answers every
// request (an object with an id and a method) exactly once.
func FuzzConn(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"echo","params":{}}`, `{`, `[]`, `{"id":null,"method":"x"}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`, `{"id":1}`, `"str"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			return
		}
		h := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return map[string]int{"ok": 1}, nil
		}
		_, in, lines := pipeConn(t, h)
		_, _ = in.Write([]byte(line + "\n" + `{"jsonrpc":"2.0","id":"probe","method":"echo"}` + "\n"))
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("connection closed")
				}
				if strings.Contains(l, `"id":"probe"`) {
					return
				}
			case <-deadline:
				t.Fatalf("no reply to the probe after %q", line)
			}
		}
	})
}

// TestDuplicateResponse: a client answering our request twice, before we
// read the first answer, does not block the read loop: the next request
// is still answered.
func TestDuplicateResponse(t *testing.T) {
	c, in, lines := pipeConn(t, func(context.Context, string, json.RawMessage) (any, error) { return "pong", nil })
	c.mu.Lock()
	c.calls["1"] = make(chan frame, 1) // a call of ours waiting, not reading yet
	c.mu.Unlock()
	for range 2 {
		_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
	}
	_, _ = in.Write([]byte(`{"jsonrpc":"2.0","id":"p","method":"ping"}` + "\n"))
	if l := next(t, lines); !strings.Contains(l, `"pong"`) {
		t.Errorf("answered %s", l)
	}
}
