package routes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
)

// Scale-out: a request that changes a session another live instance runs
// is forwarded to that instance's advertised address, so the session keeps
// one runner. Reads (messages, the log, event streams) are served by any
// instance from the shared store. A prompt without a messageID gets one
// here, before it is forwarded: if the owner dies before answering, the
// request is sent again, with the same ID, to whichever instance takes the
// session over, and admission by ID makes that idempotent.

// forwardedHeader marks a forwarded request: its receiver serves it
// itself (no forwarding loops while ownership moves).
const forwardedHeader = opencode.ForwardedHeader

var forwardClient = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// sessionOf returns the session a request names if it must be served by
// the session's owner: one that changes it, reads what only its runner
// holds (the inbox, the todo list), or answers its runner's permission or
// question request.
func (s *Server) sessionOf(r *http.Request) (string, bool) {
	if r.Method == http.MethodPost {
		// An AG-UI run with its thread in the path streams from the owner.
		if id, ok := strings.CutPrefix(r.URL.Path, "/agui/"); ok {
			return id, strings.HasPrefix(id, "ses_") && !strings.Contains(id, "/")
		}
		for _, pre := range []string{"/permission/", "/question/"} {
			if rest, ok := strings.CutPrefix(r.URL.Path, pre); ok {
				req, _, _ := strings.Cut(rest, "/")
				sid := s.m.AskSession(req)
				return sid, sid != ""
			}
		}
	}
	switch r.Method {
	case http.MethodOptions:
		return "", false
	case http.MethodGet, http.MethodHead:
		if !strings.HasSuffix(r.URL.Path, "/inbox") && !strings.HasSuffix(r.URL.Path, "/todo") {
			return "", false
		}
	}
	p := strings.TrimPrefix(r.URL.Path, "/api")
	rest, ok := strings.CutPrefix(p, "/session/")
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "/")
	return id, strings.HasPrefix(id, "ses_")
}

// mintField is the body field that names a prompt's message ID, for the
// routes that admit one.
func mintField(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/api/"):
		if strings.HasSuffix(p, "/prompt") {
			return "id"
		}
	case strings.HasSuffix(p, "/message"), strings.HasSuffix(p, "/prompt_async"),
		strings.HasSuffix(p, "/command"), strings.HasSuffix(p, "/shell"):
		return "messageID"
	}
	return ""
}

// mint gives a prompt body without a message ID one.
func (s *Server) mint(field string, body []byte) []byte {
	var obj map[string]json.RawMessage
	if field == "" || json.Unmarshal(body, &obj) != nil || obj == nil {
		return body // the owner answers what is wrong with it
	}
	if v, ok := obj[field]; ok && string(v) != `""` && string(v) != "null" {
		return body
	}
	id, _ := json.Marshal(s.ids.NewMessage())
	obj[field] = id
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

// responseIDHeader names a forwarded OpenAI response's msg_ ID
// (openai.MessageIDHeader; routes does not import the door).
const responseIDHeader = "OpenCode-Message-ID"

// aguiMaxBody is the AG-UI and OpenAI front doors' body limit (their
// maxBody): a larger run is not looked into, and the handler refuses it.
const aguiMaxBody = 32 << 20

// bodySession is the session of the two POSTs that name it only in their
// body: an AG-UI run (threadId) and a sync replay (its first event's
// aggregateID). The body is kept for the handler. A request for a session
// another instance runs is forwarded there, as the session routes are.
func namesSessionInBody(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/agui" || r.URL.Path == "/sync/replay" || r.URL.Path == "/v1/responses")
}

// bodyLimit is the body limit of the handler a request is for.
func bodyLimit(r *http.Request) int64 {
	if r.URL.Path == "/agui" || strings.HasPrefix(r.URL.Path, "/agui/") || strings.HasPrefix(r.URL.Path, "/v1/") {
		return aguiMaxBody
	}
	return maxBody
}

func bodySession(r *http.Request) (string, bool) {
	if !namesSessionInBody(r) {
		return "", false
	}
	limit := bodyLimit(r)
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > limit {
		return "", false
	}
	var p struct {
		ThreadID string `json:"threadId"`
		Events   []struct {
			AggregateID string `json:"aggregateID"`
		} `json:"events"`
		// An OpenAI response names its session directly or by the
		// response it follows.
		Conversation json.RawMessage `json:"conversation"`
		Previous     string          `json:"previous_response_id"`
	}
	if json.Unmarshal(body, &p) != nil {
		return "", false // the handler answers what is wrong with it
	}
	id := p.ThreadID
	switch r.URL.Path {
	case "/sync/replay":
		id = ""
		if len(p.Events) > 0 {
			id = p.Events[0].AggregateID
		}
	case "/v1/responses":
		var conv struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(p.Conversation, &id) != nil && json.Unmarshal(p.Conversation, &conv) == nil {
			id = conv.ID
		}
		if id == "" && p.Previous != "" {
			return p.Previous, strings.HasPrefix(p.Previous, "msg_")
		}
	}
	return id, strings.HasPrefix(id, "ses_")
}

// openaiSession is the session of an OpenAI door request that must be
// served by the session's owner: a chat completion naming its session
// (the OpenCode-Session header), a response's cancel or deletion, a
// response retrieved (it may be streamed again live: its turn's end is
// the runner's answer).
// A new response naming its session or previous response is read from
// the body (bodySession). Other reads are served from the shared store.
func (s *Server) openaiSession(r *http.Request) (string, bool) {
	p := r.URL.Path
	if p == "/v1/chat/completions" && r.Method == http.MethodPost {
		id := r.Header.Get("OpenCode-Session")
		return id, strings.HasPrefix(id, "ses_")
	}
	rest, ok := strings.CutPrefix(p, "/v1/responses/")
	if !ok {
		return "", false
	}
	id, tail, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodPost && tail == "cancel", r.Method == http.MethodDelete && tail == "",
		// A retrieve may be a live re-stream (?stream=true, or openai-go's
		// GetStreaming, which says so in a body): the owner answers it.
		r.Method == http.MethodGet && tail == "":
		return id, strings.HasPrefix(id, "msg_")
	}
	return "", false
}

// responseSession is the session of an OpenAI response ID: the input it
// names (a queued one too), or the assistant message a continuation is
// named by. ok is false when there is none: the handler answers the 404.
func (s *Server) responseSession(ctx context.Context, id string) (string, bool) {
	if in, err := s.m.FindInput(ctx, id); err == nil {
		return in.SessionID, true
	}
	sid, err := s.m.MessageSession(ctx, id)
	return sid, err == nil
}

func (s *Server) forward(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.sessionOf(r)
		if !ok && (namesSessionInBody(r) || strings.HasPrefix(r.URL.Path, "/v1/")) && r.Header.Get(forwardedHeader) == "" && s.m.Clustered() {
			// Only a cluster looks further: alone, the handler's own
			// decode is the only one.
			if id, ok = s.openaiSession(r); !ok && namesSessionInBody(r) {
				id, ok = bodySession(r)
			}
			if ok && strings.HasPrefix(id, "msg_") {
				id, ok = s.responseSession(r.Context(), id)
			}
		}
		if !ok || r.Header.Get(forwardedHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		addr, err := s.m.Owner(r.Context(), id)
		if err != nil || addr == "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, bodyLimit(r)))
		if err != nil {
			s.refuse(w, r, &opencode.Error{Code: opencode.ETooLarge, Kind: "Payload",
				Message: "request body unreadable or too large: " + err.Error()})
			return
		}
		body = s.mint(mintField(r), body)
		if r.URL.Path == "/v1/responses" && r.Header.Get(responseIDHeader) == "" {
			// Sent again to the next owner if this one dies before
			// answering, a response is admitted once: it is named here,
			// and admission is idempotent by ID.
			r.Header.Set(responseIDHeader, s.ids.NewMessage())
		}
		window := s.cfg.ForwardWindow
		if window <= 0 {
			window = 5 * time.Second
		}
		deadline := time.Now().Add(window)
		for {
			err := s.proxy(w, r, addr, body)
			if err == nil {
				return
			}
			s.log.Warn("forward to the session's owner failed", "session", id, "owner", addr, "err", err)
			if time.Now().After(deadline) || r.Context().Err() != nil {
				s.refuse(w, r, &opencode.Error{Code: opencode.EUnavailable, SessionID: id,
					Message: "The instance running session " + id + " does not answer; retry the request", Cause: err})
				return
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
			}
			if addr, err = s.m.Owner(r.Context(), id); err == nil && addr == "" {
				// Nobody live owns it now: this instance claims and serves it.
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				next.ServeHTTP(w, r)
				return
			}
		}
	})
}

// errNoAnswer is a forward whose target gave no response at all.
var errNoAnswer = errors.New("no response")

// proxy sends one attempt to the owner. It returns an error only when no
// response reached the client (a retry is then safe to send).
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, addr string, body []byte) error {
	target, err := url.Parse(addr)
	if err != nil {
		return err
	}
	var failed error
	rp := &httputil.ReverseProxy{
		Transport:     forwardClient,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			if err == nil {
				err = errNoAnswer
			}
			failed = err
		},
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.Header.Del("Content-Length")
	rp.ServeHTTP(w, r2)
	return failed
}
