package routes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

type page struct {
	Data   []struct{ ID string }
	Cursor struct{ Previous, Next *string }
}

// walk follows next cursors from first, returning every ID in order.
func walk(t *testing.T, c *biClient, first string, each func()) []string {
	t.Helper()
	var ids []string
	path := first
	for range 50 {
		r := c.must("GET", path, "", nil)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s", path, r.status, r.body)
		}
		var p page
		json.Unmarshal(r.body, &p)
		if len(p.Data) == 0 {
			if p.Cursor.Next != nil || p.Cursor.Previous != nil {
				t.Errorf("an empty page has cursors: %s", r.body)
			}
			return ids
		}
		for _, d := range p.Data {
			ids = append(ids, d.ID)
		}
		if each != nil {
			each()
		}
		u, _ := url.Parse(path)
		q := u.Query()
		q.Set("cursor", *p.Cursor.Next)
		q.Del("order")
		u.RawQuery = q.Encode()
		path = u.String()
	}
	t.Fatal("no end of pages")
	return nil
}

// TestV2Cursors: session and message lists page with opaque cursors that
// stay right while new items arrive between pages, and go back with
// previous.
func TestV2Cursors(t *testing.T) {
	c := biStart(t, testserver.Options{})
	var want []string
	for range 5 {
		want = append(want, c.newSession())
	}
	slices.Reverse(want) // newest first
	got := walk(t, c, "/api/session?limit=2", func() { c.newSession() })
	if !slices.Equal(got, want) {
		t.Errorf("sessions paged with inserts = %v\nwant %v", got, want)
	}

	ses := want[0]
	for range 3 {
		c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"x"}],"noReply":true}`))
	}
	var all page
	json.Unmarshal(c.must("GET", "/api/session/"+ses+"/message?order=asc", "", nil).body, &all)
	var asc []string
	for _, d := range all.Data {
		asc = append(asc, d.ID)
	}
	added := 0
	got = walk(t, c, "/api/session/"+ses+"/message?limit=2&order=asc", func() {
		if added < 2 {
			added++
			c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"y"}],"noReply":true}`))
		}
	})
	if len(got) != len(asc)+2 || !slices.Equal(got[:len(asc)], asc) {
		t.Errorf("messages paged ascending while posting = %v, first %v", got, asc)
	}

	// previous from the second page is the first page.
	var p1, p2, back page
	json.Unmarshal(c.must("GET", "/api/session/"+ses+"/message?limit=2", "", nil).body, &p1)
	json.Unmarshal(c.must("GET", "/api/session/"+ses+"/message?limit=2&cursor="+*p1.Cursor.Next, "", nil).body, &p2)
	json.Unmarshal(c.must("GET", "/api/session/"+ses+"/message?limit=2&cursor="+*p2.Cursor.Previous, "", nil).body, &back)
	if len(back.Data) != 2 || back.Data[0].ID != p1.Data[0].ID || back.Data[1].ID != p1.Data[1].ID {
		t.Errorf("previous of page 2 = %+v, want %+v", back.Data, p1.Data)
	}
	for _, bad := range []string{"/api/session?cursor=nope", "/api/session/" + ses + "/message?cursor=%21%21",
		"/api/session/" + ses + "/message?cursor=" + *p1.Cursor.Next + "&order=asc", "/api/session?limit=0"} {
		if r := c.must("GET", bad, "", nil); r.status != 400 {
			t.Errorf("GET %s = %d %s", bad, r.status, r.body)
		}
	}
}

// TestLastEventIDWins: the SDK reconnects with its original URL (its
// ?after=) plus Last-Event-ID; the header names where it really stopped.
func TestLastEventIDWins(t *testing.T) {
	c := biStart(t, testserver.Options{})
	ses := c.newSession()
	c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"x"}]}`))
	first := func(hdr map[string]string, query string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", c.ts.URL+"/api/session/"+ses+"/event"+query, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.c.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				return id
			}
		}
		t.Fatal("no frame")
		return ""
	}
	if got := first(nil, "?after=1"); got != "2" {
		t.Errorf("?after=1 starts at %s, want 2", got)
	}
	if got := first(map[string]string{"Last-Event-ID": "4"}, "?after=1"); got != "5" {
		t.Errorf("Last-Event-ID 4 with ?after=1 starts at %s, want 5", got)
	}
}

// TestPartIDClash: a client-chosen part ID already in use (a part of
// another message, of another session, of an assistant message, or of a
// pending input) is a 409 naming the part, and nothing is admitted.
func TestPartIDClash(t *testing.T) {
	c := biStart(t, testserver.Options{})
	a, b := c.newSession(), c.newSession()
	c.must("POST", "/session/"+a+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"x","id":"prt_clientone000000000000001"}]}`))
	var ms []struct {
		Parts []struct{ ID, Type string }
	}
	json.Unmarshal(c.must("GET", "/session/"+a+"/message", "", nil).body, &ms)
	asstPart := ms[1].Parts[0].ID
	for _, tc := range []struct{ name, ses, part string }{
		{"same session", a, "prt_clientone000000000000001"},
		{"another session", b, "prt_clientone000000000000001"},
		{"an assistant part", b, asstPart},
	} {
		body := `{"parts":[{"type":"text","text":"y","id":"` + tc.part + `"}]}`
		r := c.must("POST", "/session/"+tc.ses+"/prompt_async", "application/json", []byte(body))
		if r.status != 409 || !strings.Contains(string(r.body), tc.part) {
			t.Errorf("%s: %d %s, want 409 naming %s", tc.name, r.status, r.body, tc.part)
		}
	}
	// Nothing was admitted in b.
	var inbox struct{ Data []any }
	json.Unmarshal(c.must("GET", "/api/session/"+b+"/inbox", "", nil).body, &inbox)
	var bm []any
	json.Unmarshal(c.must("GET", "/session/"+b+"/message", "", nil).body, &bm)
	if len(inbox.Data) != 0 || len(bm) != 0 {
		t.Errorf("a refused prompt left %d pending inputs and %d messages", len(inbox.Data), len(bm))
	}
}
