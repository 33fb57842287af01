package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chunkReader returns at most n bytes per Read, so lines and frames arrive
// split across reads.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// collect runs sseConn.each over in, read through rd and a bufio.Reader of
// size bufSize, and returns copies of the data lines it was given.
func collect(t *testing.T, rd io.Reader, bufSize int) []string {
	t.Helper()
	c := &sseConn{body: io.NopCloser(rd), r: bufio.NewReaderSize(rd, bufSize)}
	var got []string
	c.each(func(line []byte, now time.Time) bool {
		if now.IsZero() {
			t.Errorf("line %q: zero receive time", line)
		}
		got = append(got, string(line)) // line may alias the reader's buffer
		return true
	})
	return got
}

func TestSSEEach(t *testing.T) {
	long := `data: {"type":"message.part.delta","properties":{"delta":"` + strings.Repeat("x", 200) + `"}}` + "\n"
	cases := []struct {
		name string
		in   string
		want []string // data lines handed to f, with their line ending
	}{
		{"data-only frames",
			"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
			[]string{"data: {\"a\":1}\n", "data: {\"b\":2}\n"}},
		{"multi-line data: every data line on its own, not joined",
			"data: one\ndata: two\n\ndata: three\n\n",
			[]string{"data: one\n", "data: two\n", "data: three\n"}},
		{"comments and heartbeats skipped",
			": heartbeat\n\n:\n\ndata: x\n\n: heartbeat\n\n",
			[]string{"data: x\n"}},
		{"CRLF line endings kept on the line",
			"data: x\r\n\r\n: hb\r\n\r\ndata: y\r\n\r\n",
			[]string{"data: x\r\n", "data: y\r\n"}},
		{"event, id and retry fields ignored",
			"event: message\nid: 7\nretry: 1000\ndata: z\n\nid: 8\ndata: w\n\n",
			[]string{"data: z\n", "data: w\n"}},
		{"no space after the colon",
			"data:x\n\n",
			[]string{"data:x\n"}},
		{"empty data line is still a data line",
			"data:\n\ndata: \n\n",
			[]string{"data:\n", "data: \n"}},
		{"field name without colon, other case, leading space: not data",
			"data\n\nDATA: a\n\n data: b\n\ndatum: c\n\n",
			nil},
		{"last frame without the blank line: lines are delivered as they end",
			"data: a\n\ndata: b\n",
			[]string{"data: a\n", "data: b\n"}},
		{"last line without a newline is dropped",
			"data: a\n\ndata: b",
			[]string{"data: a\n"}},
		{"line longer than the read buffer delivered whole",
			": hb\n\n" + long + "\ndata: after\n\n",
			[]string{long, "data: after\n"}},
		{"empty stream", "", nil},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte per read", iotest.OneByteReader},
		{"half per read", iotest.HalfReader},
		{"3 bytes per read", func(r io.Reader) io.Reader { return chunkReader{r, 3} }},
		{"7 bytes per read", func(r io.Reader) io.Reader { return chunkReader{r, 7} }},
	}
	for _, tc := range cases {
		for _, rd := range readers {
			for _, size := range []int{16, 64 << 10} { // 16: bufio's minimum, every longer line takes the buffer-full path
				t.Run(fmt.Sprintf("%s/%s/buf%d", tc.name, rd.name, size), func(t *testing.T) {
					got := collect(t, rd.wrap(strings.NewReader(tc.in)), size)
					if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
						t.Errorf("got  %q\nwant %q", got, tc.want)
					}
				})
			}
		}
	}
}

func TestSSEEachStops(t *testing.T) {
	c := &sseConn{r: bufio.NewReader(strings.NewReader("data: 1\n\ndata: 2\n\ndata: 3\n\n"))}
	var got []string
	c.each(func(line []byte, _ time.Time) bool {
		got = append(got, string(line))
		return len(got) < 2
	})
	if want := []string{"data: 1\n", "data: 2\n"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q (each stops once f returns false)", got, want)
	}
	rest, _ := io.ReadAll(c.r)
	if string(rest) != "\ndata: 3\n\n" {
		t.Errorf("left unread %q, want %q", rest, "\ndata: 3\n\n")
	}
}

func TestParseFrame(t *testing.T) {
	cases := []struct {
		name, line, typ, sid string
	}{
		{"/event delta",
			`data: {"type":"message.part.delta","properties":{"sessionID":"ses_a","messageID":"msg_1","partID":"prt_1","field":"text","delta":"hi"}}` + "\n",
			"message.part.delta", "ses_a"},
		{"/global/event wraps the payload",
			`data: {"directory":"/tmp/w","project":"global","payload":{"type":"session.idle","properties":{"sessionID":"ses_b"}}}` + "\n",
			"session.idle", "ses_b"},
		{"durable event: session from aggregateID",
			`data: {"id":"evt_1","type":"session.next.prompted","durable":{"aggregateID":"ses_c","seq":3,"version":1},"data":{}}` + "\n",
			"session.next.prompted", "ses_c"},
		{"sessionID wins over aggregateID",
			`data: {"type":"session.next.step.ended","durable":{"aggregateID":"ses_agg"},"properties":{"sessionID":"ses_s"}}` + "\n",
			"session.next.step.ended", "ses_s"},
		{"no session",
			`data: {"id":"evt_0","type":"server.connected","properties":{}}` + "\n",
			"server.connected", ""},
		{"CRLF",
			`data: {"type":"session.idle","properties":{"sessionID":"ses_e"}}` + "\r\n",
			"session.idle", "ses_e"},
		{"the first \"type\" key wins, even a nested one",
			`data: {"properties":{"part":{"type":"text","sessionID":"ses_d"}},"type":"message.part.updated"}` + "\n",
			"text", "ses_d"},
		{"only compact JSON: a space after the colon is not matched",
			`data: {"type": "session.idle", "properties": {"sessionID": "ses_f"}}` + "\n",
			"", ""},
		{"unterminated values",
			`data: {"type":"session.id`,
			"", ""},
		{"empty data", "data: \n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, sid := parseFrame([]byte(tc.line))
			if typ != tc.typ || sid != tc.sid {
				t.Errorf("parseFrame(%q) = (%q, %q), want (%q, %q)", tc.line, typ, sid, tc.typ, tc.sid)
			}
		})
	}
}

func TestOpenSSE(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "want Accept: text/event-stream, got "+r.Header.Get("Accept"), http.StatusNotAcceptable)
			return
		}
		switch r.URL.Path {
		case "/event":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": hello\n\nevent: message\n"+
				`data: {"type":"server.connected","properties":{}}`+"\n\n: heartbeat\n\n"+
				`data: {"type":"session.idle","properties":{"sessionID":"ses_1"}}`+"\n\n")
		case "/silent":
			io.WriteString(w, ": heartbeat\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	b := newBench(options{url: srv.URL + "/"})

	c, err := b.openSSE("/event")
	if err != nil {
		t.Fatal(err)
	}
	defer c.body.Close()
	var got []string
	c.each(func(line []byte, _ time.Time) bool {
		got = append(got, string(line))
		return true
	})
	// openSSE has consumed everything up to and including server.connected
	if want := []string{`data: {"type":"session.idle","properties":{"sessionID":"ses_1"}}` + "\n"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after openSSE, each got %q, want %q", got, want)
	}

	if _, err := b.openSSE("/nope"); err == nil || err.Error() != "GET /nope: 404" {
		t.Errorf("404: err = %v, want GET /nope: 404", err)
	}
	if _, err := b.openSSE("/silent"); err == nil || err.Error() != "GET /silent: EOF before the first frame" {
		t.Errorf("stream without a data line: err = %v, want GET /silent: EOF before the first frame", err)
	}
}

func TestSubClient(t *testing.T) {
	b := newBench(options{url: "http://127.0.0.1:1", perIP: 0})
	if b.subClient(0) != b.sc || b.subClient(1000) != b.sc {
		t.Error("-subs-per-ip 0: want the default SSE client for every subscriber")
	}
	b = newBench(options{url: "http://127.0.0.1:1", perIP: 2})
	c0, c1, c2, c3, c4 := b.subClient(0), b.subClient(1), b.subClient(2), b.subClient(3), b.subClient(4)
	if c0 == b.sc || c0 != c1 || c2 != c3 || c0 == c2 || c4 == c2 || c4 == c0 {
		t.Errorf("-subs-per-ip 2: want subscribers 0,1 / 2,3 / 4 on three distinct clients, none the default")
	}
	if len(b.scByIP) != 3 {
		t.Errorf("%d clients, want 3", len(b.scByIP))
	}
}
