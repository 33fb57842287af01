package routes

// The terminal API (/pty): OpenCode 1.18.33's routes on package pty, as
// recorded from opencode serve in testdata/reference/pty. A terminal
// belongs to the directory of the request that created it (lists and
// look-ups see their directory's only, as OpenCode's are per instance);
// its websocket (/pty/{ptyID}/connect) sends the output kept from the
// client's cursor, a control frame with the cursor reached (a binary
// frame: byte 0, then {"cursor":N}), then the live output as text frames,
// and writes what the client sends to the terminal.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/pty"
)

const (
	ptyPrefix = identifier.Prefix("pty")
	// ptyTicketTTL is how long a connect ticket is good for, once.
	ptyTicketTTL  = 60 * time.Second
	ptyMaxTickets = 10000
	// ptyChunk bounds one output frame (OpenCode's replay chunk).
	ptyChunk = 64 << 10
	// ptyInputLimit bounds one input frame (a paste).
	ptyInputLimit = 1 << 20
)

type ptyRoutes struct {
	s       *Server
	m       *pty.Manager
	mu      sync.Mutex
	tickets map[string]ptyTicket
}

// ptyTicket is an issued connect ticket: for one terminal of one directory.
type ptyTicket struct {
	id, dir string
	expires time.Time
}

func (s *Server) mountPTY(r chi.Router) {
	m := s.cfg.PTY
	if m == nil {
		m = pty.New(pty.Options{Done: s.cfg.Done, Logger: s.log})
	}
	p := &ptyRoutes{s: s, m: m, tickets: map[string]ptyTicket{}}
	m.OnEvent(p.publish)
	r.Get("/pty", p.h(p.list))
	r.Post("/pty", p.h(p.create))
	r.Get("/pty/shells", p.h(p.shells))
	r.Get("/pty/{ptyID}", p.h(p.get))
	r.Put("/pty/{ptyID}", p.h(p.update))
	r.Delete("/pty/{ptyID}", p.h(p.remove))
	r.Post("/pty/{ptyID}/connect-token", p.h(p.connectToken))
	r.Get("/pty/{ptyID}/connect", p.h(p.connect))
	p.mountV2(r)
}

// ptyError is an answer OpenCode gives in the tagged shape {_tag, ...}
// on these v1 routes.
type ptyError struct {
	status int
	body   any
}

func (e *ptyError) Error() string { return fmt.Sprintf("%d %v", e.status, e.body) }

func ptyNotFound(id string) error {
	return &ptyError{http.StatusNotFound, struct {
		Tag     string `json:"_tag"`
		PtyID   string `json:"ptyID"`
		Message string `json:"message"`
	}{"PtyNotFoundError", id, "PTY session not found: " + id}}
}

var ptyForbidden = &ptyError{http.StatusForbidden, struct {
	Tag     string `json:"_tag"`
	Message string `json:"message"`
}{"PtyForbiddenError", "Invalid PTY connect token request"}}

func (p *ptyRoutes) h(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return p.hf(v1, f)
}

// hf is h for a route family: the v2 /api/pty routes answer their errors
// in the v2 shapes.
func (p *ptyRoutes) hf(fam family, f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := f(w, r)
		if err == nil {
			return
		}
		var pe *ptyError
		var se *pty.SpecError
		switch {
		case fam == v2 && errors.Is(err, ptyForbidden):
			writeJSON(w, http.StatusForbidden, map[string]any{"_tag": "ForbiddenError", "message": "Invalid PTY connect token request"})
			return
		case errors.As(err, &pe):
			writeJSON(w, pe.status, pe.body)
			return
		case errors.As(err, &se):
			err = badRequest("Payload", se.Field, se.Message)
		case errors.Is(err, pty.ErrTooMany):
			err = &opencode.Error{Code: opencode.ETooMany, Message: "Too many terminals are running: remove one (DELETE /pty/{ptyID}) first"}
		case errors.Is(err, pty.ErrTooManyClients):
			err = &opencode.Error{Code: opencode.ETooMany, Message: "Too many clients are connected to this terminal"}
		case errors.Is(err, pty.ErrClosed):
			err = &opencode.Error{Code: opencode.EUnavailable, Message: "The server is shutting down"}
		case errors.Is(err, pty.ErrUnsupported):
			err = badRequest("Payload", "", "The terminal (/pty) is not supported on Windows")
		}
		writeError(w, r, fam, p.s.log, err)
	}
}

// publish puts a terminal's event on /event, in its directory.
func (p *ptyRoutes) publish(e pty.Event) {
	if p.s.cfg.Publish == nil {
		return
	}
	var props any
	switch e.Type {
	case pty.EvCreated, pty.EvUpdated:
		props = struct {
			Info pty.Info `json:"info"`
		}{e.Info}
	case pty.EvExited:
		props = struct {
			ID       string `json:"id"`
			ExitCode int    `json:"exitCode"`
		}{e.Info.ID, e.ExitCode}
	default:
		props = struct {
			ID string `json:"id"`
		}{e.Info.ID}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify writes "<", ">" and "&"
	if err := enc.Encode(props); err != nil {
		return
	}
	p.s.cfg.Publish(&opencode.Event{ID: p.s.ids.NewEvent(), Type: e.Type, Directory: e.Directory,
		Data: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
}

// ptyID reads and checks the {ptyID} path parameter.
func ptyID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "ptyID")
	if err := identifier.Check(ptyPrefix, id); err != nil {
		return "", badRequest("Params", "ptyID", "Invalid ptyID: expected an ID starting with \"pty_\"")
	}
	return id, nil
}

// running is the request's terminal if it runs: OpenCode's routes answer
// 404 for an exited one too.
func (p *ptyRoutes) running(r *http.Request) (pty.Info, error) {
	id, err := ptyID(r)
	if err != nil {
		return pty.Info{}, err
	}
	info, err := p.m.Get(p.s.directory(r), id)
	if err != nil || info.Status != pty.Running {
		return pty.Info{}, ptyNotFound(id)
	}
	return info, nil
}

func (p *ptyRoutes) get(w http.ResponseWriter, r *http.Request) error {
	info, err := p.running(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (p *ptyRoutes) list(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, p.m.List(p.s.directory(r)))
	return nil
}

func (p *ptyRoutes) shells(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, pty.Shells())
	return nil
}

type ptyCreateIn struct {
	Command *string           `json:"command"`
	Args    []string          `json:"args"`
	Cwd     *string           `json:"cwd"`
	Title   *string           `json:"title"`
	Env     map[string]string `json:"env"`
}

// create is POST /pty: a terminal in the request's directory (or cwd).
func (p *ptyRoutes) create(w http.ResponseWriter, r *http.Request) error {
	var in ptyCreateIn
	if err := decodeBody(r, &in, false); err != nil {
		return err
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	info, err := p.m.Create(pty.Spec{ID: p.s.ids.Ascending(ptyPrefix), Directory: p.s.directory(r),
		Command: deref(in.Command), Args: in.Args, Cwd: deref(in.Cwd), Title: deref(in.Title), Env: in.Env})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

type ptyUpdateIn struct {
	Title *string `json:"title"`
	Size  *struct {
		Rows *int64 `json:"rows"`
		Cols *int64 `json:"cols"`
	} `json:"size"`
}

// update is PUT /pty/{ptyID}: its title and size (the terminal's window
// size, which its processes see at once).
func (p *ptyRoutes) update(w http.ResponseWriter, r *http.Request) error {
	id, err := ptyID(r)
	if err != nil {
		return err
	}
	var in ptyUpdateIn
	if err := decodeBody(r, &in, false); err != nil {
		return err
	}
	var size *pty.Size
	if in.Size != nil {
		dims := [2]uint16{}
		for i, d := range []struct {
			name string
			v    *int64
		}{{"size.rows", in.Size.Rows}, {"size.cols", in.Size.Cols}} {
			switch {
			case d.v == nil:
				return badRequest("Payload", d.name, fmt.Sprintf("Missing key at [%q]", d.name))
			case *d.v <= 0:
				return badRequest("Payload", d.name, fmt.Sprintf("Expected a value greater than 0 at [%q], got %d", d.name, *d.v))
			case *d.v > 65535:
				return badRequest("Payload", d.name, fmt.Sprintf("Expected at most 65535 at [%q], got %d", d.name, *d.v))
			}
			dims[i] = uint16(*d.v)
		}
		size = &pty.Size{Rows: dims[0], Cols: dims[1]}
	}
	if _, err := p.running(r); err != nil {
		return err
	}
	title := ""
	if in.Title != nil {
		title = *in.Title
	}
	info, err := p.m.Update(p.s.directory(r), id, title, size)
	if errors.Is(err, pty.ErrNotFound) {
		return ptyNotFound(id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// remove is DELETE /pty/{ptyID}: the terminal and every process it
// started are ended before the answer.
func (p *ptyRoutes) remove(w http.ResponseWriter, r *http.Request) error {
	info, err := p.running(r)
	if err != nil {
		return err
	}
	if err := p.m.Remove(p.s.directory(r), info.ID); errors.Is(err, pty.ErrNotFound) {
		return ptyNotFound(info.ID)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// connectToken is POST /pty/{ptyID}/connect-token: a single-use ticket
// for the websocket, for a browser that cannot send the password there.
// Like OpenCode it wants the x-opencode-ticket: 1 header and a same-site
// origin, so another site's page cannot have one issued.
func (p *ptyRoutes) connectToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := ptyID(r); err != nil {
		return err
	}
	if r.Header.Get("x-opencode-ticket") != "1" || !p.s.ptyOrigin(r) {
		return ptyForbidden
	}
	info, err := p.running(r)
	if err != nil {
		return err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	raw[6] = raw[6]&0x0f | 0x40 // a version 4 UUID, as OpenCode's
	raw[8] = raw[8]&0x3f | 0x80
	ticket := fmt.Sprintf("%x-%x-%x-%x-%x", raw[0:4], raw[4:6], raw[6:8], raw[8:10], raw[10:16])
	now := time.Now()
	p.mu.Lock()
	if len(p.tickets) >= ptyMaxTickets {
		for k, t := range p.tickets {
			if now.After(t.expires) || len(p.tickets) >= ptyMaxTickets {
				delete(p.tickets, k)
			}
		}
	}
	p.tickets[ticket] = ptyTicket{id: info.ID, dir: p.s.directory(r), expires: now.Add(ptyTicketTTL)}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Ticket    string `json:"ticket"`
		ExpiresIn int    `json:"expires_in"`
	}{ticket, int(ptyTicketTTL / time.Second)})
	return nil
}

// consume uses up a ticket: good for terminal id of dir, once, in time.
func (p *ptyRoutes) consume(ticket, id, dir string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.tickets[ticket]
	delete(p.tickets, ticket)
	return ok && time.Now().Before(t.expires) && t.id == id && t.dir == dir
}

// ptyOrigin reports whether a browser request comes from an allowed
// origin (the CORS rules): websockets are not subject to CORS, so another
// site's page could open one otherwise. An Origin equal to the request's
// Host is not enough: under DNS rebinding both are the attacker's name.
// No Origin is a program, not a page (the Host check guards those).
func (s *Server) ptyOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || s.allowedOrigin(o, r)
}

// isPTYConnect reports whether r is the terminal websocket route.
func isPTYConnect(r *http.Request) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(r.URL.Path, "/api"), "/pty/")
	if !ok || r.Method != http.MethodGet {
		return false
	}
	id, tail, _ := strings.Cut(rest, "/")
	return id != "" && tail == "connect"
}

// ptyQueryAuth is the password OpenCode's web app puts in the websocket's
// URL (auth_token: base64 of user:password), where a browser cannot send
// an Authorization header. Only the terminal websocket takes it.
func ptyQueryAuth(r *http.Request) (user, pass string, ok bool) {
	if !isPTYConnect(r) {
		return "", "", false
	}
	tok := r.URL.Query().Get("auth_token")
	if tok == "" {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(tok)
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// ptyTicketed reports whether r is a terminal websocket with a ticket: it
// needs no password, the handler checks the ticket (issued behind the
// password, single use, 60 s, for that terminal and directory).
func ptyTicketed(r *http.Request) bool {
	return isPTYConnect(r) && r.URL.Query().Get("ticket") != ""
}

// logURL is a request's URL for the log, without the credentials a
// websocket carries in it.
func logURL(u *url.URL) string {
	q := u.Query()
	if q.Get("auth_token") == "" && q.Get("ticket") == "" {
		return u.String()
	}
	for _, k := range []string{"auth_token", "ticket"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
		}
	}
	c := *u
	c.RawQuery = q.Encode()
	return c.String()
}

// ptyCursor is the connect cursor as OpenCode reads it: a safe integer of
// at least -1 (-1: from the end), anything else 0 (everything kept).
func ptyCursor(r *http.Request) int64 {
	v := r.URL.Query().Get("cursor")
	if v == "" {
		return 0
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f != float64(int64(f)) || f < -1 || f > 1<<53-1 {
		return 0
	}
	return int64(f)
}

// isUpgrade reports whether r asks for a websocket, as websocket.Accept
// checks it (so Accept does not answer in plain text).
func isUpgrade(r *http.Request) bool {
	has := func(h, token string) bool {
		for _, v := range r.Header.Values(h) {
			for _, t := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(t), token) {
					return true
				}
			}
		}
		return false
	}
	return r.ProtoAtLeast(1, 1) && has("Connection", "upgrade") && has("Upgrade", "websocket") &&
		r.Header.Get("Sec-WebSocket-Version") == "13" && r.Header.Get("Sec-WebSocket-Key") != ""
}

// connect is GET /pty/{ptyID}/connect, the terminal's websocket.
func (p *ptyRoutes) connect(w http.ResponseWriter, r *http.Request) error {
	id, err := ptyID(r)
	if err != nil {
		return err
	}
	dir := p.s.directory(r)
	if t := r.URL.Query().Get("ticket"); t != "" && !p.consume(t, id, dir) {
		return &opencode.Error{Code: opencode.EForbidden, Message: "Invalid or expired PTY connect ticket"}
	}
	if !p.s.ptyOrigin(r) {
		return &opencode.Error{Code: opencode.EForbidden, Message: "Origin " + clip(r.Header.Get("Origin")) + " is not allowed"}
	}
	if _, err := p.running(r); err != nil {
		return err
	}
	if !isUpgrade(r) {
		return badRequest("Params", "", "GET /pty/{ptyID}/connect is a WebSocket: send an Upgrade request")
	}
	// A terminal's websocket holds one of its client's stream slots, as
	// an event stream does.
	release, ok := p.s.streams.acquire(r)
	if !ok {
		return tooManyStreams
	}
	defer release()
	c, err := p.m.Attach(dir, id, ptyCursor(r))
	if errors.Is(err, pty.ErrTooManyClients) {
		return err
	}
	if err != nil {
		return ptyNotFound(id)
	}
	defer c.Detach()
	// The connection outlives the server's request timeouts: it is a
	// terminal. Writes get a deadline each.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // origin checked above
	if err != nil {
		return nil // Accept answered
	}
	p.serve(ws, c)
	return nil
}

// serve runs an accepted terminal websocket until the terminal ends (1000;
// 1001 when the server shuts down) or the client goes away. What it sends
// is the terminal's one buffer, read by this client's cursor; a client
// that does not take a frame within writeTimeout is cut off, as a slow
// event stream is: nothing waits for it.
func (p *ptyRoutes) serve(ws *websocket.Conn, c *pty.Client) {
	ws.SetReadLimit(ptyInputLimit)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer cancel()
		for {
			typ, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary && !utf8.Valid(data) {
				continue // OpenCode drops input that is not UTF-8
			}
			_ = c.Write(data) // fails only once the terminal ended, which Next reports
		}
	}()
	send := func(typ websocket.MessageType, b []byte) error {
		wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
		defer wcancel()
		return ws.Write(wctx, typ, b)
	}
	meta := func(cursor int64) error {
		return send(websocket.MessageBinary, append([]byte{0}, fmt.Appendf(nil, `{"cursor":%d}`, cursor)...))
	}
	err := func() error {
		for text := c.Replay(ptyChunk); text != nil; text = c.Replay(ptyChunk) {
			if err := send(websocket.MessageText, text); err != nil {
				return err
			}
		}
		if err := meta(c.Cursor); err != nil {
			return err
		}
		cur := c.Cursor
		for {
			text, at, err := c.Next(ctx, ptyChunk)
			if err != nil {
				return err
			}
			if at != cur { // output this client had not read is no longer kept
				if err := meta(at); err != nil {
					return err
				}
			}
			if err := send(websocket.MessageText, text); err != nil {
				return err
			}
			cur = at + utf16Len(text)
		}
	}()
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, pty.ErrRemoved):
		_ = ws.Close(websocket.StatusNormalClosure, "")
	case errors.Is(err, pty.ErrClosed):
		_ = ws.Close(websocket.StatusGoingAway, "server closing")
	default: // the client went away, or stopped reading
		_ = ws.CloseNow()
	}
	cancel()
	<-read
}

// utf16Len is the length of s as OpenCode and its web app count it.
func utf16Len(s []byte) int64 {
	var n int64
	for _, r := range string(s) {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
