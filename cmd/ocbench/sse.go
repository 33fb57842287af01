// SSE streams: connecting, reading data lines, finding a frame's type and
// session.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

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
