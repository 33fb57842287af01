package routes

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
)

// pageCursor is OpenCode's opaque v2 cursor: base64url (no padding) of a
// small JSON object naming the item a page starts after (direction next)
// or before (previous). Anchoring on an item, not an offset, keeps pages
// stable while new items arrive.
type pageCursor struct {
	// Anchor is the session lists' anchor (ID and creation time).
	Anchor *sessionAnchor `json:"anchor,omitempty"`
	// ID is the message lists' anchor.
	ID        string `json:"id,omitempty"`
	Order     string `json:"order,omitempty"`
	Direction string `json:"direction,omitempty"`
}

type sessionAnchor struct {
	ID        string `json:"id"`
	Time      int64  `json:"time"`
	Direction string `json:"direction"`
}

func (c pageCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

var errCursor = badRequest("Query", "cursor", "Invalid cursor")

func parseCursor(s string) (pageCursor, error) {
	var c pageCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return c, errCursor
	}
	dir := c.Direction
	if c.Anchor != nil {
		dir = c.Anchor.Direction
	}
	if dir != "next" && dir != "previous" {
		return c, errCursor
	}
	return c, nil
}

// pageLimit reads ?limit= (a positive integer, def when absent). OpenCode
// sets no upper bound: its web app lists sessions with limit=5000.
func pageLimit(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, badRequest("Query", "limit", "Expected an integer greater than 0 at [\"limit\"]")
	}
	return n, nil
}

// cursors is a page's {previous, next}: null both when the page is empty.
func cursors(empty bool, prev, next pageCursor) map[string]any {
	if empty {
		return map[string]any{"previous": nil, "next": nil}
	}
	return map[string]any{"previous": prev.String(), "next": next.String()}
}
