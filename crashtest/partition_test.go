package crashtest

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// partitionProxy forwards TCP connections to a PostgreSQL server. Once
// partitioned it forwards nothing either way on the connections it holds
// and accepts new ones without connecting or answering them: a silent
// network, not a refused one (no reset, no FIN; what was sent waits, as in
// a real network's buffers). heal lets everything held flow again.
type partitionProxy struct {
	ln     net.Listener
	target string
	closed chan struct{}

	mu sync.Mutex
	// open is closed while the proxy forwards.
	open  chan struct{}
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionProxy{ln: ln, target: target, closed: make(chan struct{}), open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				return
			}
			p.wg.Add(1)
			go p.serve(c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *partitionProxy) addr() string { return p.ln.Addr().String() }

// partition stops forwarding; heal resumes it.
func (p *partitionProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *partitionProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// wait blocks while the proxy is partitioned; false: it is closing.
func (p *partitionProxy) wait() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.closed:
		return false
	}
}

// track records a connection for close; false (and c closed) once closing.
func (p *partitionProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

// serve connects an accepted connection upstream (only once not
// partitioned) and pumps both ways.
func (p *partitionProxy) serve(c net.Conn) {
	defer p.wg.Done()
	if !p.wait() {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		return
	}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.pump(c, up) }()
	p.pump(up, c)
}

// pump copies src to dst while not partitioned; what it read as a
// partition began is held until it heals. The end of either direction
// ends the connection.
func (p *partitionProxy) pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for p.wait() {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *partitionProxy) close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// answer is one request's outcome during the partition.
type answer struct {
	status     int
	retryAfter string
	took       time.Duration
	body       []byte
	err        error
}

// timedRequest sends one request and times its answer (err: none came
// within d).
func (c *client) timedRequest(method, path string, body []byte, d time.Duration) answer {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{took: time.Since(start), err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start), body: b, err: err}
}

// TestPartitionAnswersAndDrains: the network to PostgreSQL goes silent (a
// TCP proxy stops forwarding and accepts without answering) under a running
// turn with inputs queued. Every request is answered within the bounded
// store deadline (three quarters of the lease) — 503 with Retry-After for
// what needs the store, never a hang or a 500. Once the network is back
// every acknowledged input is delivered exactly once, with no client
// request to the session, within the lease TTL + 5 s (plus the turns' own
// time).
func TestPartitionAnswersAndDrains(t *testing.T) {
	pg := pgtest.Need(t)
	proxy := startProxy(t, pg.Addr())
	dir := t.TempDir()
	const chunks, delay = 20, 50 * time.Millisecond // a turn of about a second
	srv := startServer(t, filepath.Join(dir, "data"), filepath.Join(dir, "server.log"), "--store", "postgres",
		"--postgres-url", pgtest.URLAt(proxy.addr(), pg.FreshDB(t)), "--lease-ttl", clusterTTL.String(),
		"--scripted-chunks", strconv.Itoa(chunks), "--scripted-delay", delay.String())
	cl := newClient(srv.url)
	defer cl.close()
	sid := newID("ses")
	if st, body, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create: %d %v %s", st, err, body)
	}
	prompt := func(id, delivery, text string) []byte {
		return mustJSON(map[string]any{"messageID": id, "delivery": delivery,
			"parts": []any{map[string]any{"type": "text", "text": text}}})
	}
	var acked []string // every input answered with a 2xx
	for i, d := range []string{"steer", "queue", "queue", "queue"} {
		id := newID("msg")
		st, body, err := cl.do("POST", "/session/"+sid+"/prompt_async", prompt(id, d, "input "+string(rune('a'+i))))
		if err != nil || st != 204 {
			t.Fatalf("prompt %d: %d %v %s", i, st, err, body)
		}
		acked = append(acked, id)
	}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		var status map[string]any
		return cl.getJSON("/session/status", &status) == nil && status[sid] != nil
	}) {
		t.Fatal("the first turn did not start")
	}

	// The LISTEN connection sends nothing while no other instance speaks:
	// a partition cuts it silently, and only its ping finds out (then the
	// event streams are cut, so their clients reconnect).
	feed := openStream(t, cl, "/event")
	proxy.partition()
	cut := time.Now()
	// A request is answered within the store deadline (3/4 of the lease)
	// for each store call it waits on; the bound leaves room for two.
	limit := clusterTTL + 3*time.Second
	var unacked []string // prompts refused during the partition
	check := func(round int, method, path string, body []byte) answer {
		t.Helper()
		a := cl.timedRequest(method, path, body, 4*limit)
		what := method + " " + path
		switch {
		case a.err != nil:
			t.Errorf("round %d: %s not answered after %v: %v", round, what, a.took.Round(time.Millisecond), a.err)
			return a
		case a.took > limit:
			t.Errorf("round %d: %s answered %d after %v, over %v", round, what, a.status, a.took.Round(time.Millisecond), limit)
		case a.status >= 500 && a.status != http.StatusServiceUnavailable:
			t.Errorf("round %d: %s answered %d: %s", round, what, a.status, clip(a.body))
		case a.status == http.StatusServiceUnavailable && a.retryAfter == "":
			t.Errorf("round %d: %s answered 503 with no Retry-After", round, what)
		}
		t.Logf("round %d: %s: %d (Retry-After %q) in %v", round, what, a.status, a.retryAfter, a.took.Round(time.Millisecond))
		return a
	}
	// Each round sends the four at once. The first meets the running
	// turn's commit under way (the prompt waits for the runner); the
	// rounds past the lease TTL an instance that lost its lease, and the
	// session's background retries back off meanwhile.
	for round := 1; round <= 2 || time.Since(cut) < 2*clusterTTL+time.Second; round++ {
		if round > 20 {
			t.Fatal("the partition rounds do not end")
		}
		id := newID("msg")
		var wg sync.WaitGroup
		for _, path := range []string{"/session/" + sid, "/session/" + sid + "/message", "/session/status"} {
			wg.Go(func() { check(round, "GET", path, nil) })
		}
		a := check(round, "POST", "/session/"+sid+"/prompt_async", prompt(id, "queue", "during the partition"))
		wg.Wait()
		if a.err == nil && a.status/100 == 2 {
			acked = append(acked, id) // acknowledged: it must be delivered too
		} else {
			unacked = append(unacked, id)
		}
	}
	t.Logf("partitioned for %v", time.Since(cut).Round(time.Millisecond))
	select {
	case <-feed.done:
	default:
		t.Errorf("the /event stream is still open after %v of partition: the lost LISTEN connection went unnoticed", time.Since(cut).Round(time.Millisecond))
	}

	proxy.heal()
	healed := time.Now()
	queued := len(acked) - 1 // the first is the interrupted turn's input
	turns := time.Duration(queued+1) * chunks * delay
	drained := clusterTTL + 5*time.Second + turns
	answered := func() int { return answeredOf(cl, sid, acked) }
	if !poll(drained, 50*time.Millisecond, func() bool { return answered() == len(acked) }) {
		t.Fatalf("%d of the %d acknowledged inputs answered %v after the partition ended\n%s",
			answered(), len(acked), time.Since(healed), tail(srv.logPath, 40))
	}
	t.Logf("all %d acknowledged inputs answered %v after the partition ended", len(acked), time.Since(healed).Round(10*time.Millisecond))
	checkDeliveredOnce(t, cl, sid, acked, acked[0])
	var msgs []v1Message
	if err := cl.getJSON("/session/"+sid+"/message", &msgs); err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for _, m := range msgs {
		if m.Info.Role == "user" {
			users[m.Info.ID]++
		}
	}
	for _, id := range unacked {
		if users[id] > 1 {
			t.Errorf("input %s (refused during the partition) delivered %d times", id, users[id])
		}
	}
	var h history
	problems, err := cl.fetchHistory(sid, &h, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, l := range errorLines(srv.logPath) {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			t.Errorf("server log: %s", l)
		}
	}
}
