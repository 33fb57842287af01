package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// TestScaleOutClients: the real clients work against three instances on
// one PostgreSQL database behind a round-robin load balancer, as README's
// "Scale out" example runs them: each of their requests may land on any
// instance (the session is created on one, prompted through another, its
// events streamed from a third).
func TestScaleOutClients(t *testing.T) {
	t.Parallel()
	pg := pgtest.StartFor(t)
	db := pg.URL(pg.FreshDB(t))
	dir := t.TempDir()
	const reply = "answered by the cluster"
	var targets []*url.URL
	for range 3 {
		s := startServer(t, serverOptions{reply: reply, dir: dir,
			extra: []string{"--store", "postgres", "--postgres-url", db, "--lease-ttl", "3s"}})
		u, _ := url.Parse(s.URL)
		targets = append(targets, u)
	}
	// The load balancer: round robin, no stickiness, SSE unbuffered.
	var next atomic.Uint64
	var hits [3]atomic.Int64
	lb := httptest.NewServer(&httputil.ReverseProxy{
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			i := next.Add(1) % 3
			hits[i].Add(1)
			pr.SetURL(targets[i])
		},
	})
	t.Cleanup(func() { lb.CloseClientConnections(); lb.Close() }) // after the clients' cleanups
	front := &server{URL: lb.URL, Dir: dir, client: &http.Client{Timeout: 30 * time.Second}}

	oc := newClient(t, dir)
	runPrintsReply(t, oc, front, "hello scale-out", reply)
	for i := range hits {
		if hits[i].Load() == 0 {
			t.Errorf("instance %d got no request: the test did not spread the client over the instances", i)
		}
	}

	// The TUI, attached to the load balancer: its prompt is answered live.
	x := startTUI(t, front)
	x.typeLine("hello from the TUI")
	x.waitScreen(30*time.Second, reply)
	if s := x.screen(); !strings.Contains(s, "hello from the TUI") {
		t.Errorf("the TUI does not show the prompt:\n%s", s)
	}
}
