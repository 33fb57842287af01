// The monitor: one /event stream dispatching by session.

package main

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type watcher struct {
	mu      sync.Mutex
	start   time.Time
	firstAt time.Time
	idleAt  time.Time
	idle    chan struct{}
	// v2 tracking
	prompted  int
	endedLast bool // a step ended since the last prompted
	events    int
	lastEvent time.Time
}

type monitor struct {
	mu      sync.Mutex
	w       map[string]*watcher
	durable atomic.Int64 // durable (session.next.*, not *.delta) frames seen
	frames  atomic.Int64
	body    io.Closer
	done    chan struct{}
}

func (b *bench) openMonitor(path string) (*monitor, error) {
	c, err := b.openSSE(path)
	if err != nil {
		return nil, err
	}
	m := &monitor{w: map[string]*watcher{}, body: c.body, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		c.each(func(line []byte, now time.Time) bool {
			m.frames.Add(1)
			typ, sid := parseFrame(line)
			if strings.HasPrefix(typ, "session.next.") && !strings.HasSuffix(typ, ".delta") {
				m.durable.Add(1)
			}
			m.mu.Lock()
			w := m.w[sid]
			m.mu.Unlock()
			if w == nil {
				return true
			}
			w.mu.Lock()
			w.events++
			w.lastEvent = now
			switch typ {
			case "message.part.delta":
				if w.firstAt.IsZero() {
					w.firstAt = now
				}
			case "session.idle":
				if w.idleAt.IsZero() {
					w.idleAt = now
					close(w.idle)
				}
			case "session.next.prompted":
				w.prompted++
				w.endedLast = false
			case "session.next.step.ended", "session.next.step.failed":
				w.endedLast = true
			}
			w.mu.Unlock()
			return true
		})
	}()
	return m, nil
}

func (m *monitor) watch(sid string) *watcher {
	w := &watcher{idle: make(chan struct{})}
	m.mu.Lock()
	m.w[sid] = w
	m.mu.Unlock()
	return w
}

func (m *monitor) unwatch(sid string, w *watcher) {
	m.mu.Lock()
	if m.w[sid] == w {
		delete(m.w, sid)
	}
	m.mu.Unlock()
}

func (m *monitor) close() { m.body.Close(); <-m.done }
