// Command yardstick is a bare OpenCode-API server for benchmarks only: it
// does just the work a prompt's path cannot avoid, so ocbench run against it
// in the same run as against our server says how much of our latency is
// ours and how much is the path itself (loopback HTTP, one fsync, the model
// call, SSE writes on the same CPUs). See BENCHMARKS.md, "Yardstick".
//
//	go run ./bench/yardstick --port 14303 --data DIR --model-url http://127.0.0.1:18799/v1
//
// Per prompt (POST /session/{id}/prompt_async) it reads the body, appends it
// to one file and fsyncs once, answers 204, calls the model (OpenAI chat
// completions, streaming) and writes session.status busy, one
// message.part.delta per streamed chunk, session.status idle and
// session.idle to every /event and /global/event subscriber, in OpenCode's
// v1 frame shapes. Each event is encoded once; each subscriber has a
// goroutine and a bounded queue and flushes once per drained batch.
//
// There is no store, no history, no session state (any session ID is
// accepted), no message or part records, no group commit, no write deadline
// and no per-address stream cap. It serves what ocbench's seq, conc, fanout
// and rss scenarios need (GET /global/health, POST /session, prompt_async,
// /event, /global/event); everything else is 404, so ocbench skips admit.
// A noReply prompt is stored and not answered. --pprof ADDR serves
// net/http/pprof (bench/profile.sh YARDSTICK=1). Standard library only.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof" // on DefaultServeMux, served only with --pprof
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queue is each subscriber's buffer in frames; a subscriber that falls this
// far behind is dropped.
const queue = 2048

type server struct {
	dir      string
	modelURL string
	model    string
	log      *os.File
	hc       *http.Client
	seq      atomic.Int64 // IDs: sessions, messages, parts, events

	mu   sync.Mutex
	subs map[*sub]struct{}
}

type sub struct {
	global bool
	c      chan *frame
	gone   chan struct{} // closed when the subscriber is dropped
}

// frame is one event encoded once for each stream shape.
type frame struct{ v1, global []byte }

func main() {
	port := flag.Int("port", 14303, "port on 127.0.0.1")
	host := flag.String("hostname", "127.0.0.1", "address to listen on")
	data := flag.String("data", "yardstick-data", "directory of the prompt log (one file, fsynced per prompt)")
	modelURL := flag.String("model-url", "http://127.0.0.1:18799/v1", "OpenAI-compatible base URL (the stub model)")
	model := flag.String("model", "stub-model", "model name sent to the model")
	dir := flag.String("directory", "", "project directory reported on /global/event (default: working directory)")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address, e.g. 127.0.0.1:16061")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Print(http.ListenAndServe(*pprofAddr, nil)) }()
	}
	if *dir == "" {
		*dir, _ = os.Getwd()
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		log.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(*data, "prompts.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	s := &server{dir: *dir, modelURL: strings.TrimRight(*modelURL, "/"), model: *model, log: f,
		hc:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}},
		subs: map[*sub]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /global/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"healthy":true,"version":"yardstick"}`)
	})
	mux.HandleFunc("POST /session", s.createSession)
	mux.HandleFunc("POST /session/{id}/prompt_async", s.promptAsync)
	mux.HandleFunc("GET /event", func(w http.ResponseWriter, r *http.Request) { s.stream(w, r, false) })
	mux.HandleFunc("GET /global/event", func(w http.ResponseWriter, r *http.Request) { s.stream(w, r, true) })
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("yardstick listening on http://%s\n", ln.Addr())
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

func (s *server) id(prefix string) string { return prefix + strconv.FormatInt(s.seq.Add(1), 10) }

func (s *server) createSession(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now().UnixMilli()
	b, _ := json.Marshal(map[string]any{"id": s.id("ses_"), "directory": s.dir, "title": "yardstick",
		"time": map[string]int64{"created": now, "updated": now}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// promptAsync: read, append + fsync, 204, then the turn in the background.
func (s *server) promptAsync(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var in struct {
		NoReply bool `json:"noReply"`
		Parts   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"parts"`
	}
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var text strings.Builder
	for _, p := range in.Parts {
		if p.Type == "text" {
			text.WriteString(p.Text)
		}
	}
	rec := make([]byte, 0, len(sid)+len(body)+2)
	rec = append(append(append(rec, sid...), ' '), body...)
	if _, err := s.log.Write(append(rec, '\n')); err == nil {
		err = s.log.Sync()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	if !in.NoReply {
		go s.turn(sid, text.String())
	}
}

// turn calls the model and publishes its reply as it streams.
func (s *server) turn(sid, text string) {
	sidJSON := jsonString(sid)
	s.publish("session.status", `{"sessionID":`+sidJSON+`,"status":{"type":"busy"}}`)
	defer func() {
		s.publish("session.status", `{"sessionID":`+sidJSON+`,"status":{"type":"idle"}}`)
		s.publish("session.idle", `{"sessionID":`+sidJSON+`}`)
	}()
	req, _ := json.Marshal(map[string]any{"model": s.model, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	resp, err := s.hc.Post(s.modelURL+"/chat/completions", "application/json", bytes.NewReader(req))
	if err != nil {
		log.Printf("model: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		log.Printf("model: %s", resp.Status)
		return
	}
	head := `{"sessionID":` + sidJSON + `,"messageID":"` + s.id("msg_") + `","partID":"` + s.id("prt_") + `","field":"text","delta":`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if bytes.Equal(line, []byte("[DONE]")) {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(line, &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
			continue
		}
		s.publish("message.part.delta", head+jsonString(chunk.Choices[0].Delta.Content)+"}")
	}
	if err := sc.Err(); err != nil {
		log.Printf("model stream: %v", err)
	}
}

// publish encodes the event once and queues it for every subscriber; a
// subscriber whose queue is full is dropped.
func (s *server) publish(typ, props string) {
	payload := `{"id":"` + s.id("evt_") + `","type":"` + typ + `","properties":` + props + `}`
	f := &frame{v1: []byte("data: " + payload + "\n\n"),
		global: []byte(`data: {"directory":` + jsonString(s.dir) + `,"payload":` + payload + "}\n\n")}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.subs {
		select {
		case c.c <- f:
		default:
			delete(s.subs, c)
			close(c.gone)
		}
	}
}

// stream serves /event (global false) or /global/event: server.connected,
// then every published frame, one flush per drained batch.
func (s *server) stream(w http.ResponseWriter, r *http.Request, global bool) {
	c := &sub{global: global, c: make(chan *frame, queue), gone: make(chan struct{})}
	s.mu.Lock()
	s.subs[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.subs[c]; ok {
			delete(s.subs, c)
			close(c.gone)
		}
		s.mu.Unlock()
	}()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	connected := `{"id":"` + s.id("evt_") + `","type":"server.connected","properties":{}}`
	if global {
		connected = `{"payload":` + connected + `}`
	}
	rc := http.NewResponseController(w)
	if _, err := io.WriteString(w, "data: "+connected+"\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for {
		select {
		case f := <-c.c:
			for more := true; more; {
				b := f.v1
				if global {
					b = f.global
				}
				if _, err := w.Write(b); err != nil {
					return
				}
				select {
				case f = <-c.c:
				default:
					more = false
				}
			}
			if rc.Flush() != nil {
				return
			}
		case <-c.gone:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func jsonString(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}
