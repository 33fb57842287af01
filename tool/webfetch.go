package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"golang.org/x/net/html"
)

// WebFetch fetches a URL and returns its content as markdown (HTML is
// converted), text or HTML, with OpenCode's limits: 5 MB, 30 s by default,
// 120 s at most.
type WebFetch struct {
	// Client makes the requests (http.DefaultClient when nil).
	Client *http.Client
}

const (
	webfetchMaxBytes = 5 << 20
	webfetchTimeout  = 30 * time.Second
	webfetchMaxTime  = 120 * time.Second
	webfetchAgent    = "Mozilla/5.0 (compatible; opencode-server)"
)

type webfetchInput struct {
	URL     string   `json:"url"`
	Format  string   `json:"format"`
	Timeout *float64 `json:"timeout"`
}

func (WebFetch) Name() string { return "webfetch" }

func (WebFetch) Description() string {
	return `Fetch the content of a URL.

- Takes a URL and an optional format: markdown (the default; HTML pages are converted), text (HTML reduced to its text) or html (as served).
- Use it to read documentation, an issue or an API reference the task needs.
- The URL must be a full http:// or https:// URL. Responses over 5 MB are refused; the timeout is in seconds (default 30, at most 120).
- This tool is read-only: it does not change anything on this machine.
- If another tool offers better web access for the task, prefer it.`
}

func (WebFetch) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"url":{"type":"string","description":"The URL to fetch content from"},` +
		`"format":{"type":"string","enum":["text","markdown","html"],"default":"markdown","description":"The format to return the content in (text, markdown, or html). Defaults to markdown."},` +
		`"timeout":{"type":"number","description":"Optional timeout in seconds (max 120)"}},"required":["url"]}`)
}

func (t WebFetch) input(c Call) (webfetchInput, error) {
	var in webfetchInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, err
	}
	if !strings.HasPrefix(in.URL, "http://") && !strings.HasPrefix(in.URL, "https://") {
		return in, errors.New("URL must start with http:// or https://")
	}
	switch in.Format {
	case "":
		in.Format = "markdown"
	case "markdown", "text", "html":
	default:
		return in, fmt.Errorf("invalid input for tool webfetch: format must be text, markdown or html")
	}
	return in, nil
}

func (t WebFetch) Permission(c Call) (string, []string, error) {
	in, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "webfetch", []string{in.URL}, nil
}

// accept is the Accept header per format, preferring what needs no
// conversion.
var accept = map[string]string{
	"markdown": "text/markdown;q=1.0, text/x-markdown;q=0.9, text/plain;q=0.8, text/html;q=0.7, */*;q=0.1",
	"text":     "text/plain;q=1.0, text/markdown;q=0.9, text/html;q=0.8, */*;q=0.1",
	"html":     "text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, text/markdown;q=0.7, */*;q=0.1",
}

func (t WebFetch) Run(ctx context.Context, c Call) (Result, error) {
	in, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	timeout := webfetchTimeout
	if in.Timeout != nil && *in.Timeout > 0 {
		timeout = min(time.Duration(*in.Timeout*float64(time.Second)), webfetchMaxTime)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return Result{}, fmt.Errorf("invalid URL: %w", err)
	}
	req.Header.Set("User-Agent", webfetchAgent)
	req.Header.Set("Accept", accept[in.Format])
	req.Header.Set("Accept-Language", "en-US,en;q=0.9")
	client := t.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, errors.New("Request timed out")
		}
		return Result{}, fmt.Errorf("fetch %s: %w", in.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{}, fmt.Errorf("Request failed with status code: %d", resp.StatusCode)
	}
	if resp.ContentLength > webfetchMaxBytes {
		return Result{}, errors.New("Response too large (exceeds 5MB limit)")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, webfetchMaxBytes+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{}, errors.New("Request timed out")
		}
		return Result{}, fmt.Errorf("fetch %s: %w", in.URL, err)
	}
	if len(body) > webfetchMaxBytes {
		return Result{}, errors.New("Response too large (exceeds 5MB limit)")
	}
	ctype := resp.Header.Get("Content-Type")
	mime := strings.ToLower(strings.TrimSpace(strings.Split(ctype, ";")[0]))
	title := in.URL + " (" + ctype + ")"
	if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" {
		return Result{Title: title, Output: "Image fetched successfully", Metadata: map[string]any{}}, nil
	}
	out := string(body)
	if strings.Contains(ctype, "text/html") {
		switch in.Format {
		case "markdown":
			if md, err := htmltomarkdown.ConvertString(out); err == nil {
				out = md
			}
		case "text":
			out = htmlText(out)
		}
	}
	return Result{Title: title, Output: out, Metadata: map[string]any{}}, nil
}

// htmlText is the text of an HTML document, without scripts, styles and
// embedded objects.
func htmlText(doc string) string {
	z := html.NewTokenizer(strings.NewReader(doc))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(b.String())
		case html.StartTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "iframe", "object", "embed":
				skip++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style", "noscript", "iframe", "object", "embed":
				if skip > 0 {
					skip--
				}
			}
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		}
	}
}
