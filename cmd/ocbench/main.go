// Command ocbench is a load tool for any OpenCode-API server (ours or the
// real `opencode serve`): prompt latency, concurrency, SSE fan-out,
// admission throughput, durable event rate, RSS and long-history latency;
// and, opt-in (-scenarios scale -urls A,B,C), throughput over several
// instances sharing one database; and (-scenarios ext -agent NAME
// [-acp-bare CMD]) first text through an external agent against the same
// agent driven bare over ACP.
//
// It can also run the stub model both servers are pointed at:
//
//	ocbench -stub-only -stub-addr 127.0.0.1:8799 -print-config stub.json   # serve the stub, write opencode.json
//	ocbench -url http://127.0.0.1:4096 -pid $PID                           # run every scenario
//
// Output is plain text followed by one line `SUMMARY {json}`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
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
	bigMB      int
	history    int
	historyN   int
	historyPar int
	historyMax time.Duration
	timeout    time.Duration
	perIP      int

	urls         string
	scaleWorkers int
	scaleDur     time.Duration

	agent       string
	acpBare     string
	extSessions int
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
	flag.StringVar(&o.scenarios, "scenarios", "seq,conc,fanout,rss,admit,history", "scenarios to run (comma list): seq conc fanout rss admit history scale ext big openai")
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
	flag.IntVar(&o.bigMB, "big-mb", 8, "big: the prompt's size in MiB")
	flag.IntVar(&o.history, "history", 10000, "history: earlier messages (noReply prompts) in the long session")
	flag.IntVar(&o.historyN, "history-n", 20, "history: measured prompts on the long and on an empty session")
	flag.IntVar(&o.historyPar, "history-par", 8, "history: concurrent noReply posts while filling")
	flag.DurationVar(&o.historyMax, "history-max", 3*time.Minute, "history: stop filling after this long (the reached count is reported)")
	flag.IntVar(&o.perIP, "subs-per-ip", 48, "fanout: subscribers per loopback source address (127.0.0.2, .3, ...; servers may cap streams per client address); 0 = all from the default address")
	flag.StringVar(&o.urls, "urls", "", "scale: comma-separated base URLs of instances sharing one database (default: just -url; -url defaults to the first)")
	flag.IntVar(&o.scaleWorkers, "scale-workers", 16, "scale: client workers, each prompting its own session back to back")
	flag.DurationVar(&o.scaleDur, "scale-dur", 15*time.Second, "scale: how long the workers start new prompts")
	flag.StringVar(&o.agent, "agent", "", "agent of every prompt (e.g. an external agent of the server's opencode.json; default: the server's default)")
	flag.StringVar(&o.acpBare, "acp-bare", "", "ext: also run this ACP agent command line (split on spaces) in the working directory and measure first text over ACP directly, in turn with the bridged prompts (without -url: only that)")
	flag.IntVar(&o.extSessions, "ext-sessions", 20, "ext: sessions (the measured one included) that each ran a prompt on -agent before the RSS sample")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "timeout for one prompt to reach session.idle")
	serve := flag.String("serve", "", "run OUR server in-process on this address (with -pprof) instead of benchmarking")
	pprofAddr := flag.String("pprof", "", "with -serve: net/http/pprof address, e.g. 127.0.0.1:6060")
	serveStore := flag.String("serve-store", "sqlite", "with -serve: sqlite or memory")
	serveData := flag.String("serve-data", "ocbench-data", "with -serve: data directory")
	serveConfig := flag.String("serve-config", "", "with -serve: opencode.json (e.g. from -print-config)")
	serveReply := flag.String("serve-reply", "", "with -serve: the built-in scripted model's reply (default: it quotes the prompt)")
	blockRate := flag.Int("block-rate", 0, "with -serve: runtime.SetBlockProfileRate (ns; 0 = off) for /debug/pprof/block")
	mutexFrac := flag.Int("mutex-frac", 0, "with -serve: runtime.SetMutexProfileFraction (0 = off) for /debug/pprof/mutex")
	chk := flag.Bool("check", false, "check the floor of make bench-check: ocbench -check OURS.txt YARDSTICK.txt (exit 1 when a guard is over its limit)")
	cmp := flag.Bool("compare", false, "print the side-by-side tables of ocbench outputs: ocbench -compare OURS.txt OPENCODE.txt [YARDSTICK.txt] (OPENCODE.txt '-': only the yardstick table)")
	flag.Parse()
	if *chk {
		if flag.NArg() != 2 {
			fatal("-check needs two files: OURS YARDSTICK")
		}
		failed, err := check(os.Stdout, flag.Arg(0), flag.Arg(1))
		if err != nil {
			fatal("%v", err)
		}
		if failed > 0 {
			fmt.Fprintf(os.Stderr, "bench-check: %d of %d guards not met\n", failed, len(guards))
			os.Exit(1)
		}
		return
	}
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
		if err := serveProfiled(*serve, *pprofAddr, *serveStore, *serveData, *serveConfig, *serveReply); err != nil {
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
	if o.acpBare != "" && o.url == "" && o.urls == "" {
		if err := newBench(o).bare(); err != nil {
			fatal("%v", err)
		}
		return
	}
	if o.url == "" && o.urls != "" {
		o.url, _, _ = strings.Cut(o.urls, ",")
		o.url = strings.TrimSpace(o.url)
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
	out     io.Writer // os.Stdout; tests read it from a buffer
}

func newBench(o options) *bench {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext, DisableCompression: true}
	str := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}
	return &bench{o: o, base: strings.TrimRight(o.url, "/"),
		hc:      &http.Client{Transport: tr, Timeout: 2 * time.Minute},
		sc:      &http.Client{Transport: str},
		summary: map[string]any{"url": o.url, "label": o.label}, out: os.Stdout}
}

func (b *bench) printf(f string, a ...any) { fmt.Fprintf(b.out, f, a...) }

func (b *bench) has(s string) bool {
	for _, x := range strings.Split(b.o.scenarios, ",") {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
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
	if b.has("scale") {
		if err := b.scale(); err != nil {
			return err
		}
	}
	if b.has("big") {
		if err := b.big(); err != nil {
			return err
		}
	}
	if b.has("openai") {
		if err := b.openaiScenario(); err != nil {
			return err
		}
	}
	if b.has("ext") {
		if err := b.ext(); err != nil {
			return err
		}
	}
	b.sampleRSS("rss_end_kb", "at end")
	b.summary["prompts_total"] = b.prompts.Load()
	b.summary["wall_s"] = time.Since(b.start).Seconds()
	summaryLine(b.out, b.summary)
	return nil
}
