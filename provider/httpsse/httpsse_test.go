package httpsse

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestRetryAfter(t *testing.T) {
	cases := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, -1},
		{"ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"ms wins", http.Header{"Retry-After-Ms": {"10"}, "Retry-After": {"9"}}, 10 * time.Millisecond},
		{"junk", http.Header{"Retry-After": {"soon"}}, -1},
		{"huge", http.Header{"Retry-After": {"1e30"}}, maxWait},
	}
	for _, c := range cases {
		if got := RetryAfter(c.h); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRead: named and unnamed events, multi-line data, comments, CRLF, an
// event without its blank line at the end, and a cut body.
func TestRead(t *testing.T) {
	body := ": ping\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: one\ndata: two\n\nevent: last\ndata: end"
	var got []string
	ended, err := Read(context.Background(), strings.NewReader(body), 200, func(ev Event) (bool, error) {
		got = append(got, ev.Name+"|"+string(ev.Data))
		return false, nil
	})
	want := "message_start|{\"a\":1}\n|one\ntwo\nlast|end"
	if err != nil || ended || strings.Join(got, "\n") != want {
		t.Fatalf("ended %v err %v events\n%s\nwant\n%s", ended, err, strings.Join(got, "\n"), want)
	}
	// Done stops at once.
	n := 0
	ended, err = Read(context.Background(), strings.NewReader("data: a\n\ndata: b\n\n"), 200, func(Event) (bool, error) { n++; return true, nil })
	if !ended || err != nil || n != 1 {
		t.Fatalf("done: ended %v err %v after %d events", ended, err, n)
	}
	// A cut connection is retryable.
	_, err = Read(context.Background(), iotest.TimeoutReader(strings.NewReader("data: a\n\n")), 200, func(Event) (bool, error) { return false, nil })
	var rt *Retryable
	if !errors.As(err, &rt) || !strings.Contains(rt.Err.Message, "stream interrupted") {
		t.Fatalf("cut body: %v", err)
	}
}
