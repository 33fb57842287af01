package routes

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// mountV2 serves the v2 terminal routes (/api/pty…): the same terminals
// and answers as /pty, in the v2 shapes ({location, data}; a delete is a
// 204; errors in the v2 family).
func (p *ptyRoutes) mountV2(r chi.Router) {
	r.Get("/api/pty", p.v2(p.list))
	r.Post("/api/pty", p.v2(p.create))
	r.Get("/api/pty/{ptyID}", p.v2(p.get))
	r.Put("/api/pty/{ptyID}", p.v2(p.update))
	r.Delete("/api/pty/{ptyID}", p.v2(p.remove))
	r.Post("/api/pty/{ptyID}/connect-token", p.v2(p.connectToken))
	r.Get("/api/pty/{ptyID}/connect", p.hf(v2, p.connect)) // the websocket: as on /pty
}

// v2 runs a /pty handler and gives its answer the v2 shape.
func (p *ptyRoutes) v2(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return p.hf(v2, func(w http.ResponseWriter, r *http.Request) error {
		var b answer
		if err := f(&b, r); err != nil {
			return err
		}
		switch {
		case b.status == http.StatusOK && r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case b.status == http.StatusOK:
			writeJSON(w, http.StatusOK, map[string]any{"location": p.s.location(r), "data": json.RawMessage(bytes.TrimSpace(b.body.Bytes()))})
		default:
			for k, v := range b.header {
				w.Header()[k] = v
			}
			w.WriteHeader(b.status)
			_, _ = w.Write(b.body.Bytes())
		}
		return nil
	})
}

// answer holds what a handler wrote, to be shaped before it goes out.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}
