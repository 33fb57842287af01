package tool

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWebFetch(t *testing.T) {
	mux := http.NewServeMux()
	page := `<html><head><title>T</title><style>p{}</style><script>var x=1</script></head><body><h1>Title</h1><p>Some <b>bold</b> text.</p><ul><li>one</li></ul></body></html>`
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("just text, accept=" + r.Header.Get("Accept")[:10]))
	})
	mux.HandleFunc("/img", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G'})
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("x", webfetchMaxBytes+10)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	run := func(in string) (Result, error) {
		return WebFetch{Client: srv.Client()}.Run(context.Background(), Call{Input: json.RawMessage(in)})
	}
	res, err := run(`{"url":"` + srv.URL + `/page"}`)
	if err != nil || !strings.Contains(res.Output, "# Title") || !strings.Contains(res.Output, "Some **bold** text.") ||
		!strings.Contains(res.Output, "- one") || strings.Contains(res.Output, "var x") {
		t.Errorf("markdown: %v\n%s", err, res.Output)
	}
	if res.Title != srv.URL+"/page (text/html; charset=utf-8)" {
		t.Errorf("title %q", res.Title)
	}
	res, err = run(`{"url":"` + srv.URL + `/page","format":"text"}`)
	if err != nil || res.Output != "TTitleSome bold text.one" {
		t.Errorf("text: %v %q", err, res.Output)
	}
	res, err = run(`{"url":"` + srv.URL + `/page","format":"html"}`)
	if err != nil || res.Output != page {
		t.Errorf("html: %v %q", err, res.Output)
	}
	if res, err = run(`{"url":"` + srv.URL + `/plain","format":"text"}`); err != nil || res.Output != "just text, accept=text/plain" {
		t.Errorf("plain: %v %q", err, res.Output)
	}
	if res, err = run(`{"url":"` + srv.URL + `/img"}`); err != nil || res.Output != "Image fetched successfully" {
		t.Errorf("image: %v %q", err, res.Output)
	}
	for in, want := range map[string]string{
		`{"url":"` + srv.URL + `/nope"}`:               "Request failed with status code: 404",
		`{"url":"` + srv.URL + `/big"}`:                "Response too large (exceeds 5MB limit)",
		`{"url":"` + srv.URL + `/slow","timeout":0.2}`: "Request timed out",
		`{"url":"ftp://example.com"}`:                  "URL must start with http:// or https://",
		`{"url":"` + srv.URL + `","format":"pdf"}`:     "format must be",
	} {
		if _, err := run(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
	// Where there is no network, it fails cleanly (a refused connection).
	if _, err := (WebFetch{}).Run(context.Background(), Call{Input: json.RawMessage(`{"url":"http://127.0.0.1:1/x","timeout":2}`)}); err == nil {
		t.Error("a fetch from a closed port succeeded")
	}
}
