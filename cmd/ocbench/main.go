// Command ocbench is a load tool for any OpenCode-API server (ours or the
// real `opencode serve`): prompt latency, concurrency, SSE fan-out,
// admission throughput, durable event rate, RSS and long-history latency.
//
// It can also run the stub model both servers are pointed at:
//
//	ocbench -stub-only -stub-addr 127.0.0.1:8799 -print-config stub.json   # serve the stub, write opencode.json
//	ocbench -url http://127.0.0.1:4096 -pid $PID                           # run every scenario
//
// Output is plain text followed by one line `SUMMARY {json}`.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

type options struct {
	url         string
	stubAddr    string
	stubOnly    bool
	printConfig string
	chunks      int
	delay       time.Duration
	pid         int
	scenarios   string
	label       string

	warmup     int
	n          int
	conc       string
	concN      int
	subs       string
	fanRounds  int
	fanPaths   string
	admitSess  int
	admitN     int
	queueFrac  float64
	rssPrompts int
	history    int
	historyN   int
	historyPar int
	historyMax time.Duration
	timeout    time.Duration
	perIP      int
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "base URL of the server under test, e.g. http://127.0.0.1:4096")
	flag.StringVar(&o.stubAddr, "stub-addr", "", "start a stub model (OpenAI-compatible; echoes the prompt, calls tools on call:NAME lines, see stubmodel.Directives) on this address, e.g. 127.0.0.1:8799")
	flag.BoolVar(&o.stubOnly, "stub-only", false, "only serve the stub model (needs -stub-addr) until SIGINT/SIGTERM")
	flag.StringVar(&o.printConfig, "print-config", "", "write an opencode.json using the stub model to this file ('-' = stdout)")
	flag.IntVar(&o.chunks, "chunks", 5, "stub model: streamed chunks per reply")
	flag.DurationVar(&o.delay, "delay", 0, "stub model: delay before each chunk")
	flag.IntVar(&o.pid, "pid", 0, "server pid: sample its RSS from /proc/<pid>/status")
	flag.StringVar(&o.scenarios, "scenarios", "seq,conc,fanout,rss,admit,history", "scenarios to run (comma list): seq conc fanout rss admit history")
	flag.StringVar(&o.label, "label", "", "label for the summary")
	flag.IntVar(&o.warmup, "warmup", 1, "warm-up prompts (new session each) before measuring")
	flag.IntVar(&o.n, "n", 50, "seq: prompts per sequential series (new session each; same session)")
	flag.StringVar(&o.conc, "conc", "1,10,100", "conc: concurrent session counts")
	flag.IntVar(&o.concN, "conc-n", 3, "conc: sequential prompts per session")
	flag.StringVar(&o.subs, "subs", "50,1000", "fanout: subscriber counts")
	flag.IntVar(&o.fanRounds, "fanout-rounds", 3, "fanout: prompts per subscriber count and stream")
	flag.StringVar(&o.fanPaths, "fanout-paths", "/event,/global/event", "fanout: SSE streams to subscribe to")
	flag.IntVar(&o.admitSess, "admit-sessions", 10, "admit: sessions posting v2 prompts concurrently")
	flag.IntVar(&o.admitN, "admit-n", 20, "admit: v2 prompts per session")
	flag.Float64Var(&o.queueFrac, "queue-frac", 0.5, "admit: fraction of prompts with delivery queue (rest steer)")
	flag.IntVar(&o.rssPrompts, "rss-prompts", 100, "rss: total prompts before the 'after N prompts' sample")
	flag.IntVar(&o.history, "history", 10000, "history: earlier messages (noReply prompts) in the long session")
	flag.IntVar(&o.historyN, "history-n", 20, "history: measured prompts on the long and on an empty session")
	flag.IntVar(&o.historyPar, "history-par", 8, "history: concurrent noReply posts while filling")
	flag.DurationVar(&o.historyMax, "history-max", 3*time.Minute, "history: stop filling after this long (the reached count is reported)")
	flag.IntVar(&o.perIP, "subs-per-ip", 48, "fanout: subscribers per loopback source address (127.0.0.2, .3, ...; servers may cap streams per client address); 0 = all from the default address")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "timeout for one prompt to reach session.idle")
	serve := flag.String("serve", "", "run OUR server in-process on this address (with -pprof) instead of benchmarking")
	pprofAddr := flag.String("pprof", "", "with -serve: net/http/pprof address, e.g. 127.0.0.1:6060")
	serveStore := flag.String("serve-store", "sqlite", "with -serve: sqlite or memory")
	serveData := flag.String("serve-data", "ocbench-data", "with -serve: data directory")
	serveConfig := flag.String("serve-config", "", "with -serve: opencode.json (e.g. from -print-config)")
	blockRate := flag.Int("block-rate", 0, "with -serve: runtime.SetBlockProfileRate (ns; 0 = off) for /debug/pprof/block")
	mutexFrac := flag.Int("mutex-frac", 0, "with -serve: runtime.SetMutexProfileFraction (0 = off) for /debug/pprof/mutex")
	cmp := flag.Bool("compare", false, "print the side-by-side tables of ocbench outputs: ocbench -compare OURS.txt OPENCODE.txt [YARDSTICK.txt] (OPENCODE.txt '-': only the yardstick table)")
	flag.Parse()
	if *cmp {
		if flag.NArg() != 2 && flag.NArg() != 3 {
			fatal("-compare needs two or three files: OURS OPENCODE [YARDSTICK]")
		}
		if flag.NArg() == 2 && flag.Arg(1) == "-" {
			fatal("-compare OURS - needs a YARDSTICK file")
		}
		if err := compare(os.Stdout, flag.Arg(0), flag.Arg(1), flag.Arg(2)); err != nil {
			fatal("%v", err)
		}
		return
	}
	if *serve != "" {
		runtime.SetBlockProfileRate(*blockRate)
		runtime.SetMutexProfileFraction(*mutexFrac)
		if err := serveProfiled(*serve, *pprofAddr, *serveStore, *serveData, *serveConfig); err != nil {
			fatal("%v", err)
		}
		return
	}

	var stubURL string
	if o.stubAddr != "" {
		stub := stubmodel.New(stubmodel.Directives, stubmodel.WithChunks(o.chunks), stubmodel.WithDelay(o.delay), stubmodel.WithoutRecording())
		u, err := stub.Start(o.stubAddr)
		if err != nil {
			fatal("stub: %v", err)
		}
		defer stub.Close()
		stubURL = u
		fmt.Fprintf(os.Stderr, "stub model listening on %s (chunks %d, delay %s)\n", u, o.chunks, o.delay)
	}
	if o.printConfig != "" {
		if stubURL == "" {
			fatal("-print-config needs -stub-addr")
		}
		cfg := configFor(stubURL)
		if o.printConfig == "-" {
			os.Stdout.Write(cfg)
		} else if err := os.WriteFile(o.printConfig, cfg, 0o644); err != nil {
			fatal("%v", err)
		}
	}
	if o.stubOnly {
		if stubURL == "" {
			fatal("-stub-only needs -stub-addr")
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		return
	}
	if o.url == "" {
		if o.printConfig != "" {
			return
		}
		fatal("-url is required")
	}
	b := newBench(o)
	if err := b.run(); err != nil {
		fatal("%v", err)
	}
}

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "ocbench: "+f+"\n", a...)
	os.Exit(1)
}

// configFor is the reference opencode.json pointed at the stub.
func configFor(stubURL string) []byte {
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
		"model": "stub/stub-model", "small_model": "stub/stub-model",
		"provider": map[string]any{"stub": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Stub",
			"options": map[string]any{"baseURL": stubURL, "apiKey": "stub-key"},
			"models": map[string]any{"stub-model": map[string]any{"name": "Stub Model", "tool_call": true,
				"limit": map[string]any{"context": 128000, "output": 4096}}},
		}},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n')
}

// ---- bench ------------------------------------------------------------------

type bench struct {
	o       options
	base    string
	hc      *http.Client // requests
	sc      *http.Client // SSE streams (no timeout)
	scMu    sync.Mutex
	scByIP  map[int]*http.Client
	mon     *monitor
	summary map[string]any
	prompts atomic.Int64 // prompts that reached session.idle (or were admitted, for v2)
	start   time.Time
}

func newBench(o options) *bench {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext, DisableCompression: true}
	str := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}
	return &bench{o: o, base: strings.TrimRight(o.url, "/"),
		hc:      &http.Client{Transport: tr, Timeout: 2 * time.Minute},
		sc:      &http.Client{Transport: str},
		summary: map[string]any{"url": o.url, "label": o.label}}
}

func (b *bench) printf(f string, a ...any) { fmt.Printf(f, a...) }

func (b *bench) has(s string) bool {
	for _, x := range strings.Split(b.o.scenarios, ",") {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

func (b *bench) rss() int64 {
	if b.o.pid == 0 {
		return 0
	}
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.o.pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(f), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return 0
}

// cpu is the server's user+system CPU time so far (/proc/<pid>/stat), 0
// without -pid. Linux reports it in clock ticks of 10 ms.
func (b *bench) cpu() time.Duration {
	if b.o.pid == 0 {
		return 0
	}
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.o.pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(f, ')')
	if i < 0 {
		return 0
	}
	fs := strings.Fields(string(f[i+1:])) // fs[0] is field 3 (state)
	if len(fs) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fs[11], 10, 64)
	st, _ := strconv.ParseInt(fs[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cpuPerPrompt records and prints the server CPU spent per prompt since c0.
func (b *bench) cpuPerPrompt(key, what string, c0 time.Duration, prompts int) {
	if b.o.pid == 0 || prompts == 0 {
		return
	}
	v := ms(b.cpu()-c0) / float64(prompts)
	b.summary[key] = v
	b.printf("%s: server CPU %.2f ms per prompt (%d prompts)\n", what, v, prompts)
}

func (b *bench) sampleRSS(key, what string) {
	if b.o.pid == 0 {
		return
	}
	v := b.rss()
	b.summary[key] = v
	b.printf("RSS %s: %d kB (%.1f MB)\n", what, v, float64(v)/1024)
}

func (b *bench) run() error {
	b.start = time.Now()
	b.printf("# ocbench %s against %s (pid %d)\n", b.o.label, b.base, b.o.pid)
	if err := b.waitHealthy(); err != nil {
		return err
	}
	b.sampleRSS("rss_start_kb", "at start")
	mon, err := b.openMonitor("/event")
	if err != nil {
		return fmt.Errorf("monitor /event: %w", err)
	}
	b.mon = mon
	defer mon.close()

	for i := 0; i < b.o.warmup; i++ {
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		r, err := b.prompt(sid, "warm-up prompt")
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		b.printf("warm-up prompt %d: first text %.1f ms, idle %.1f ms\n", i+1, ms(r.first), ms(r.idle))
		if i == 0 {
			b.summary["warmup_first_text_ms"] = ms(r.first)
		}
	}
	b.sampleRSS("rss_after_1_kb", "after 1 prompt (warm-up)")

	if b.has("seq") {
		if err := b.seq(); err != nil {
			return err
		}
	}
	if b.has("rss") {
		if err := b.fill(); err != nil {
			return err
		}
	}
	if b.has("conc") {
		if err := b.concurrency(); err != nil {
			return err
		}
	}
	if b.has("fanout") {
		if err := b.fanout(); err != nil {
			return err
		}
	}
	if b.has("admit") {
		if err := b.admit(); err != nil {
			return err
		}
	}
	if b.has("history") {
		if err := b.historyScenario(); err != nil {
			return err
		}
	}
	b.sampleRSS("rss_end_kb", "at end")
	b.summary["prompts_total"] = b.prompts.Load()
	b.summary["wall_s"] = time.Since(b.start).Seconds()
	js, _ := json.Marshal(b.summary)
	fmt.Printf("SUMMARY %s\n", js)
	return nil
}

func (b *bench) waitHealthy() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := b.hc.Get(b.base + "/global/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s not healthy: %v", b.base, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- HTTP -------------------------------------------------------------------

func (b *bench) post(path string, body any) (int, []byte, error) {
	js, _ := json.Marshal(body)
	resp, err := b.hc.Post(b.base+path, "application/json", bytes.NewReader(js))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp.StatusCode, rb, err
}

func (b *bench) createSession() (string, error) {
	st, rb, err := b.post("/session", map[string]any{})
	if err != nil {
		return "", err
	}
	var s struct {
		ID string `json:"id"`
	}
	if st/100 != 2 || json.Unmarshal(rb, &s) != nil || s.ID == "" {
		return "", fmt.Errorf("POST /session: %d %s", st, trunc(rb))
	}
	return s.ID, nil
}

func (b *bench) promptAsync(sid, text string, noReply bool) error {
	body := map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}}
	if noReply {
		body["noReply"] = true
	}
	st, rb, err := b.post("/session/"+sid+"/prompt_async", body)
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return fmt.Errorf("prompt_async: %d %s", st, trunc(rb))
	}
	return nil
}

func trunc(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// result is one prompt's latencies from the POST.
type result struct{ first, idle time.Duration }

// prompt sends prompt_async and waits for the session's first
// message.part.delta and session.idle on the monitor /event stream.
func (b *bench) prompt(sid, text string) (result, error) {
	w := b.mon.watch(sid)
	defer b.mon.unwatch(sid, w)
	t0 := time.Now()
	w.start = t0
	if err := b.promptAsync(sid, text, false); err != nil {
		return result{}, err
	}
	select {
	case <-w.idle:
	case <-time.After(b.o.timeout):
		return result{}, fmt.Errorf("session %s: no session.idle within %s", sid, b.o.timeout)
	}
	b.prompts.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	r := result{idle: w.idleAt.Sub(t0)}
	if !w.firstAt.IsZero() {
		r.first = w.firstAt.Sub(t0)
	} else {
		r.first = r.idle
	}
	return r, nil
}

// ---- monitor: one /event stream dispatching by session --------------------

type watcher struct {
	mu      sync.Mutex
	start   time.Time
	firstAt time.Time
	idleAt  time.Time
	idle    chan struct{}
	// v2 tracking
	prompted  int
	endedLast bool // a step ended since the last prompted
	events    int
	lastEvent time.Time
}

type monitor struct {
	mu      sync.Mutex
	w       map[string]*watcher
	durable atomic.Int64 // durable (session.next.*, not *.delta) frames seen
	frames  atomic.Int64
	body    io.Closer
	done    chan struct{}
}

func (b *bench) openMonitor(path string) (*monitor, error) {
	c, err := b.openSSE(path)
	if err != nil {
		return nil, err
	}
	m := &monitor{w: map[string]*watcher{}, body: c.body, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		c.each(func(line []byte, now time.Time) bool {
			m.frames.Add(1)
			typ, sid := parseFrame(line)
			if strings.HasPrefix(typ, "session.next.") && !strings.HasSuffix(typ, ".delta") {
				m.durable.Add(1)
			}
			m.mu.Lock()
			w := m.w[sid]
			m.mu.Unlock()
			if w == nil {
				return true
			}
			w.mu.Lock()
			w.events++
			w.lastEvent = now
			switch typ {
			case "message.part.delta":
				if w.firstAt.IsZero() {
					w.firstAt = now
				}
			case "session.idle":
				if w.idleAt.IsZero() {
					w.idleAt = now
					close(w.idle)
				}
			case "session.next.prompted":
				w.prompted++
				w.endedLast = false
			case "session.next.step.ended", "session.next.step.failed":
				w.endedLast = true
			}
			w.mu.Unlock()
			return true
		})
	}()
	return m, nil
}

func (m *monitor) watch(sid string) *watcher {
	w := &watcher{idle: make(chan struct{})}
	m.mu.Lock()
	m.w[sid] = w
	m.mu.Unlock()
	return w
}

func (m *monitor) unwatch(sid string, w *watcher) {
	m.mu.Lock()
	if m.w[sid] == w {
		delete(m.w, sid)
	}
	m.mu.Unlock()
}

func (m *monitor) close() { m.body.Close(); <-m.done }

// ---- SSE --------------------------------------------------------------------

type sseConn struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// subClient is the SSE client of fan-out subscriber i: subscribers are
// spread over loopback source addresses, -subs-per-ip each.
func (b *bench) subClient(i int) *http.Client {
	if b.o.perIP <= 0 {
		return b.sc
	}
	k := i / b.o.perIP
	b.scMu.Lock()
	defer b.scMu.Unlock()
	if b.scByIP == nil {
		b.scByIP = map[int]*http.Client{}
	}
	if c := b.scByIP[k]; c != nil {
		return c
	}
	ip := net.IPv4(127, byte(k/250), byte(k%250), byte(2+k%200)) // 127.x.y.z, never 127.0.0.1
	d := &net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true, DialContext: d.DialContext}}
	b.scByIP[k] = c
	return c
}

// openSSE connects and reads up to the first frame (server.connected), so
// the subscription is live when it returns.
func (b *bench) openSSE(path string) (*sseConn, error) { return b.openSSEWith(b.sc, path) }

func (b *bench) openSSEWith(hc *http.Client, path string) (*sseConn, error) {
	req, _ := http.NewRequest("GET", b.base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	c := &sseConn{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 64<<10)}
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %v before the first frame", path, err)
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			return c, nil
		}
	}
}

// each calls f with every data line until f returns false or the stream ends.
func (c *sseConn) each(f func(line []byte, now time.Time) bool) {
	var long []byte
	for {
		line, err := c.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			return
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(line) > 5 && line[0] == 'd' && bytes.HasPrefix(line, []byte("data:")) {
			if !f(line, time.Now()) {
				return
			}
		}
	}
}

var (
	kType    = []byte(`"type":"`)
	kSession = []byte(`"sessionID":"`)
	kAggr    = []byte(`"aggregateID":"`)
)

// parseFrame finds the event type (the first "type" key: the payload's,
// also in /global/event's {directory, payload}) and the session ID.
func parseFrame(line []byte) (typ, sid string) {
	typ = strField(line, kType)
	sid = strField(line, kSession)
	if sid == "" {
		sid = strField(line, kAggr)
	}
	return
}

func strField(line, key []byte) string {
	i := bytes.Index(line, key)
	if i < 0 {
		return ""
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// ---- statistics -------------------------------------------------------------

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func stats(ds []time.Duration) stat {
	if len(ds) == 0 {
		return stat{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1 // nearest rank
		i = max(0, min(i, len(s)-1))
		return ms(s[i])
	}
	med := ms(s[len(s)/2])
	if len(s)%2 == 0 {
		med = (ms(s[len(s)/2-1]) + ms(s[len(s)/2])) / 2
	}
	return stat{N: len(s), Median: med, P90: pct(0.90), P99: pct(0.99), Min: ms(s[0]), Max: ms(s[len(s)-1])}
}

func (s stat) String() string {
	return fmt.Sprintf("median %.2f ms, p90 %.2f, p99 %.2f, min %.2f, max %.2f (n=%d)", s.Median, s.P90, s.P99, s.Min, s.Max, s.N)
}

func (b *bench) report(key, what string, rs []result) {
	var f, i []time.Duration
	for _, r := range rs {
		f = append(f, r.first)
		i = append(i, r.idle)
	}
	fs, is := stats(f), stats(i)
	b.printf("%s: prompt_async -> first text: %s\n", what, fs)
	b.printf("%s: prompt_async -> session.idle: %s\n", what, is)
	b.summary[key+"_first_ms"] = fs
	b.summary[key+"_idle_ms"] = is
}

// ---- scenarios --------------------------------------------------------------

// seq (a): sequential prompts, new session each and one session.
func (b *bench) seq() error {
	c0 := b.cpu()
	var rs []result
	for i := 0; i < b.o.n; i++ {
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		r, err := b.prompt(sid, fmt.Sprintf("sequential prompt %d on a new session", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("seq_new", "(a) sequential, new session each", rs)
	sid, err := b.createSession()
	if err != nil {
		return err
	}
	rs = rs[:0]
	for i := 0; i < b.o.n; i++ {
		r, err := b.prompt(sid, fmt.Sprintf("sequential prompt %d on one session", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("seq_same", "(a) sequential, same session", rs)
	b.cpuPerPrompt("seq_cpu_ms_per_prompt", "(a) sequential", c0, 2*b.o.n)
	return nil
}

// fill (f): brings the number of prompts to -rss-prompts and samples RSS.
func (b *bench) fill() error {
	need := int64(b.o.rssPrompts) - b.prompts.Load()
	if need > 0 {
		sid, err := b.createSession()
		if err != nil {
			return err
		}
		t0 := time.Now()
		for i := int64(0); i < need; i++ {
			if _, err := b.prompt(sid, fmt.Sprintf("filler prompt %d", i)); err != nil {
				return err
			}
		}
		b.printf("%d filler prompts took %.1f s\n", need, time.Since(t0).Seconds())
	}
	b.sampleRSS("rss_after_100_kb", fmt.Sprintf("after %d prompts", b.prompts.Load()))
	b.summary["rss_after_prompts"] = b.prompts.Load()
	return nil
}

// concurrency (b): c sessions, each running -conc-n sequential prompts.
func (b *bench) concurrency() error {
	for _, cs := range strings.Split(b.o.conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(cs))
		if err != nil || c < 1 {
			continue
		}
		sids := make([]string, c)
		for i := range sids {
			if sids[i], err = b.createSession(); err != nil {
				return err
			}
		}
		var mu sync.Mutex
		var rs []result
		var firstErr error
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < c; i++ {
			wg.Add(1)
			go func(sid string) {
				defer wg.Done()
				for k := 0; k < b.o.concN; k++ {
					r, err := b.prompt(sid, fmt.Sprintf("concurrent prompt %d", k))
					mu.Lock()
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					rs = append(rs, r)
					mu.Unlock()
				}
			}(sids[i])
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		wall := time.Since(t0)
		b.report(fmt.Sprintf("conc%d", c), fmt.Sprintf("(b) %d concurrent sessions x %d prompts", c, b.o.concN), rs)
		b.printf("(b) %d concurrent sessions: %d prompts in %.2f s (%.1f prompts/s)\n", c, len(rs), wall.Seconds(), float64(len(rs))/wall.Seconds())
		b.summary[fmt.Sprintf("conc%d_prompts_per_s", c)] = float64(len(rs)) / wall.Seconds()
	}
	return nil
}

// fanout (c): S subscribers on /event or /global/event; time from
// prompt_async until the last one has seen the prompt's session.idle.
type fanRound struct {
	sid       string
	start     time.Time
	firsts    []time.Duration
	idles     []time.Duration
	remaining atomic.Int32
	done      chan struct{}
}

func (b *bench) fanout() error {
	for _, path := range strings.Split(b.o.fanPaths, ",") {
		path = strings.TrimSpace(path)
		for _, ss := range strings.Split(b.o.subs, ",") {
			s, err := strconv.Atoi(strings.TrimSpace(ss))
			if err != nil || s < 1 {
				continue
			}
			if err := b.fanoutOne(path, s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) fanoutOne(path string, s int) error {
	var cur atomic.Pointer[fanRound]
	conns := make([]*sseConn, s)
	var mu sync.Mutex
	var openErr error
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < s; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := b.openSSEWith(b.subClient(i), path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if openErr == nil {
					openErr = err
				}
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.body.Close()
			}
		}
	}
	if openErr != nil {
		closeAll()
		return fmt.Errorf("fan-out %s x%d: %w", path, s, openErr)
	}
	b.printf("(c) %d subscribers on %s connected in %.2f s\n", s, path, time.Since(t0).Seconds())
	var readers sync.WaitGroup
	for i, c := range conns {
		readers.Add(1)
		go func(i int, c *sseConn) {
			defer readers.Done()
			var seenFirst, seenIdle *fanRound
			c.each(func(line []byte, now time.Time) bool {
				r := cur.Load()
				if r == nil || seenIdle == r {
					return true
				}
				typ, sid := parseFrame(line)
				if sid != r.sid {
					return true
				}
				switch typ {
				case "message.part.delta":
					if seenFirst != r {
						seenFirst = r
						r.firsts[i] = now.Sub(r.start)
					}
				case "session.idle":
					seenIdle = r
					r.idles[i] = now.Sub(r.start)
					if seenFirst != r {
						r.firsts[i] = r.idles[i]
					}
					if r.remaining.Add(-1) == 0 {
						close(r.done)
					}
				}
				return true
			})
		}(i, c)
	}
	time.Sleep(200 * time.Millisecond)
	key := fmt.Sprintf("fanout_%s_%d", strings.ReplaceAll(strings.Trim(path, "/"), "/", "_"), s)
	if v := b.rss(); v > 0 {
		b.summary["rss_"+key+"_kb"] = v
		b.printf("RSS with %d subscribers on %s: %d kB (%.1f MB)\n", s, path, v, float64(v)/1024)
	}
	var alls, allFirst, medSub []time.Duration
	var err error
	c0 := b.cpu()
	for round := 0; round < b.o.fanRounds; round++ {
		sid, e := b.createSession()
		if e != nil {
			err = e
			break
		}
		r := &fanRound{sid: sid, firsts: make([]time.Duration, s), idles: make([]time.Duration, s), done: make(chan struct{})}
		r.remaining.Store(int32(s))
		w := b.mon.watch(sid)
		r.start = time.Now()
		w.start = r.start
		cur.Store(r)
		if e := b.promptAsyncStr(sid, fmt.Sprintf("fan-out prompt %d", round)); e != nil {
			err = e
			break
		}
		select {
		case <-r.done:
		case <-time.After(b.o.timeout):
			err = fmt.Errorf("fan-out %s x%d: only %d of %d subscribers saw session.idle within %s", path, s, s-int(r.remaining.Load()), s, b.o.timeout)
		}
		<-w.idle
		b.mon.unwatch(sid, w)
		b.prompts.Add(1)
		if err != nil {
			break
		}
		is, fs := stats(r.idles), stats(r.firsts)
		b.printf("(c) %s x%d round %d: all got first text by %.1f ms, all got session.idle by %.1f ms (median sub %.1f, min %.1f)\n",
			path, s, round, fs.Max, is.Max, is.Median, is.Min)
		alls = append(alls, time.Duration(is.Max*float64(time.Millisecond)))
		allFirst = append(allFirst, time.Duration(fs.Max*float64(time.Millisecond)))
		medSub = append(medSub, time.Duration(is.Median*float64(time.Millisecond)))
		time.Sleep(100 * time.Millisecond)
	}
	cur.Store(nil)
	closeAll()
	readers.Wait()
	if err != nil {
		return err
	}
	st := stats(alls)
	b.printf("(c) %s x%d: POST -> ALL subscribers saw session.idle: %s; all got first text median %.1f ms\n", path, s, st, stats(allFirst).Median)
	b.summary[key+"_all_idle_ms"] = st
	b.summary[key+"_all_first_ms_median"] = stats(allFirst).Median
	b.summary[key+"_median_sub_idle_ms"] = stats(medSub).Median
	b.cpuPerPrompt(key+"_cpu_ms_per_prompt", fmt.Sprintf("(c) %s x%d", path, s), c0, len(alls))
	return nil
}

func (b *bench) promptAsyncStr(sid, text string) error { return b.promptAsync(sid, text, false) }

// admit (d, e): v2 prompts with a steer/queue mix from several sessions at
// once; admissions per second, POST latency, then durable events per second
// on /event until every input has been prompted and its step has ended.
func (b *bench) admit() error {
	probe, err := b.createSession()
	if err != nil {
		return err
	}
	st, rb, err := b.post("/api/session/"+probe+"/prompt", map[string]any{"prompt": map[string]any{"text": "v2 probe"}, "delivery": "steer"})
	var ok struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err != nil || st != 200 || json.Unmarshal(rb, &ok) != nil || ok.Data.ID == "" {
		b.printf("(d) v2 POST /api/session/{id}/prompt not available (%d %s): skipped\n", st, trunc(rb))
		b.summary["admit_skipped"] = true
		return nil
	}
	time.Sleep(500 * time.Millisecond)

	sids := make([]string, b.o.admitSess)
	ws := make([]*watcher, len(sids))
	for i := range sids {
		if sids[i], err = b.createSession(); err != nil {
			return err
		}
		ws[i] = b.mon.watch(sids[i])
	}
	defer func() {
		for i, s := range sids {
			b.mon.unwatch(s, ws[i])
		}
	}()
	d0 := b.mon.durable.Load()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	steer, queue := 0, 0
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, sid := range sids {
		wg.Add(1)
		go func(i int, sid string) {
			defer wg.Done()
			for k := 0; k < b.o.admitN; k++ {
				d := "steer"
				// deterministic mix: queue for the given fraction of prompts
				if k > 0 && float64((k*7919+i)%1000)/1000 < b.o.queueFrac {
					d = "queue"
				}
				t := time.Now()
				st, rb, err := b.post("/api/session/"+sid+"/prompt", map[string]any{"prompt": map[string]any{"text": fmt.Sprintf("admission %d %s", k, d)}, "delivery": d})
				el := time.Since(t)
				mu.Lock()
				if err == nil && st != 200 {
					err = fmt.Errorf("v2 prompt: %d %s", st, trunc(rb))
				}
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				lat = append(lat, el)
				if d == "queue" {
					queue++
				} else {
					steer++
				}
				mu.Unlock()
			}
		}(i, sid)
	}
	wg.Wait()
	admitWall := time.Since(t0)
	if firstErr != nil {
		return firstErr
	}
	n := len(lat)
	ls := stats(lat)
	rate := float64(n) / admitWall.Seconds()
	b.printf("(d) %d v2 admissions (%d steer, %d queue) from %d sessions in %.3f s: %.0f admissions/s; POST latency %s\n",
		n, steer, queue, len(sids), admitWall.Seconds(), rate, ls)
	b.summary["admit_per_s"] = rate
	b.summary["admit_post_ms"] = ls
	b.summary["admit_n"] = n
	// drain: every input prompted and a step ended after the last one
	deadline := time.Now().Add(3 * time.Minute)
	drained := false
	for time.Now().Before(deadline) {
		all := true
		for _, w := range ws {
			w.mu.Lock()
			if w.prompted < b.o.admitN || !w.endedLast {
				all = false
			}
			w.mu.Unlock()
		}
		if all {
			drained = true
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	wall := time.Since(t0)
	var last time.Time
	prompted := 0
	for _, w := range ws {
		w.mu.Lock()
		if w.lastEvent.After(last) {
			last = w.lastEvent
		}
		prompted += w.prompted
		w.mu.Unlock()
	}
	if !last.IsZero() && drained {
		wall = last.Sub(t0)
	}
	durable := b.mon.durable.Load() - d0
	drate := float64(durable) / wall.Seconds()
	b.printf("(e) %d durable session.next.* events on /event in %.3f s (admission start -> drained=%v, %d/%d prompted): %.0f durable events/s\n",
		durable, wall.Seconds(), drained, prompted, n, drate)
	b.summary["durable_events"] = durable
	b.summary["durable_per_s"] = drate
	b.summary["admit_drain_s"] = wall.Seconds()
	b.summary["admit_drained"] = drained
	b.prompts.Add(int64(n))
	// let stragglers (session.idle, titles) settle before the next scenario
	time.Sleep(500 * time.Millisecond)
	return nil
}

// historyScenario (g): latency on a session with many earlier messages
// (created with noReply prompt_async) vs an empty session.
func (b *bench) historyScenario() error {
	base, err := b.createSession()
	if err != nil {
		return err
	}
	var rs []result
	for i := 0; i < b.o.historyN; i++ {
		r, err := b.prompt(base, fmt.Sprintf("empty-session prompt %d", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("history_empty", "(g) empty session", rs)

	sid, err := b.createSession()
	if err != nil {
		return err
	}
	w := b.mon.watch(sid)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	t0 := time.Now()
	stop := t0.Add(b.o.historyMax)
	var wg sync.WaitGroup
	for p := 0; p < b.o.historyPar; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1)
				if k > int64(b.o.history) || time.Now().After(stop) || failed.Load() != nil {
					return
				}
				if err := b.promptAsync(sid, fmt.Sprintf("earlier message %d", k), true); err != nil {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return fmt.Errorf("history fill: %w", *e)
	}
	filled := min(next.Load()-1, int64(b.o.history))
	// settle: no more events for the session for 1 s
	for {
		w.mu.Lock()
		quiet := time.Since(w.lastEvent) > time.Second
		w.mu.Unlock()
		if quiet {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mon.unwatch(sid, w)
	fill := time.Since(t0)
	b.printf("(g) filled %d earlier messages (noReply prompt_async, %d parallel) in %.1f s (%.0f/s)\n", filled, b.o.historyPar, fill.Seconds(), float64(filled)/fill.Seconds())
	b.summary["history_messages"] = filled
	b.summary["history_fill_s"] = fill.Seconds()
	b.sampleRSS("rss_after_history_kb", "after filling history")
	rs = rs[:0]
	for i := 0; i < b.o.historyN; i++ {
		r, err := b.prompt(sid, fmt.Sprintf("long-history prompt %d", i))
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	b.report("history_long", fmt.Sprintf("(g) session with %d earlier messages", filled), rs)
	return nil
}
