package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/opencode-server/opencode-server/opencode"
)

// The event feed between instances. The log table is the truth; a
// notification is a doorbell. The owner of a session sends, after each
// commit and never inside it (a NOTIFY in the durable transaction would
// hold a cluster-wide lock through the fsync), one notification per batch
// of published events: a durable event as its session and seq, a live one
// (text deltas, the v1 events between commits) whole. A batch over the
// 8,000-byte payload limit is stored in relay_spill and passed by
// reference. Every other instance reads the durable events from the log,
// from the last seq it delivered, so it delivers them with no gap even
// when a notification was lost or an owner died before sending one; a
// slow poll catches up a session whose doorbell never rang.

const (
	channel = "opencode_server_events"
	// payloadLimit keeps a notification under PostgreSQL's 8,000 bytes.
	payloadLimit = 7900
	// spillAge is how long a spilled payload is kept for the listeners.
	spillAge = time.Minute
)

// item is one published event as the other instances get it.
type item struct {
	// Session and Seq: a durable event (read from the log).
	Session string `json:"s"`
	Seq     int64  `json:"q,omitempty"`
	// Event: a live event, whole.
	Event *wireEvent `json:"e,omitempty"`
	// Flush asks every instance to ack, once its streams wrote out what
	// came before, with Ack (see Cluster.Flush); Dir is the session's
	// directory.
	Flush string `json:"f,omitempty"`
	Dir   string `json:"d,omitempty"`
	Ack   string `json:"a,omitempty"`
}

type wireEvent struct {
	ID        string          `json:"id"`
	Type      string          `json:"t"`
	Directory string          `json:"d,omitempty"`
	Version   int             `json:"v,omitempty"`
	Data      json.RawMessage `json:"p"`
}

type notice struct {
	Proc  string `json:"o"`
	Items []item `json:"i,omitempty"`
	// Spill names a relay_spill row holding the items.
	Spill int64 `json:"r,omitempty"`
	// Hello: a new instance listens (the others start broadcasting).
	Hello bool `json:"h,omitempty"`
}

func (c *cluster) Broadcast(e *opencode.Event) {
	if c.peers.Load() == 0 {
		return // nobody listens (a joining instance says hello first)
	}
	if e.SessionID != "" && e.Type != opencode.EvSessionDeleted {
		if _, ok := c.Held(e.SessionID); !ok {
			return // not ours (any more): a fenced runner publishes nothing
		}
	}
	it := item{Session: e.SessionID}
	if e.Durable {
		it.Seq = e.Seq
	} else {
		it.Event = &wireEvent{ID: e.ID, Type: e.Type, Directory: e.Directory, Version: e.Version, Data: e.Data}
	}
	select {
	case c.out <- it:
	case <-c.ctx.Done():
	}
}

// sendLoop sends what Broadcast queued, as few notifications as the
// payload limit allows, in order.
func (c *cluster) sendLoop() {
	defer c.wg.Done()
	var batch []item
	for {
		select {
		case <-c.ctx.Done():
			return
		case it := <-c.out:
			batch = append(batch[:0], it)
		}
	drain:
		for len(batch) < 256 {
			select {
			case it := <-c.out:
				batch = append(batch, it)
			default:
				break drain
			}
		}
		// Dropped unless this instance still holds each session: a runner
		// fenced between its publish and this send stays silent.
		// (A deleted session is held no more; its deletion still goes out
		// under a trusted lease.)
		kept := batch[:0]
		for _, it := range batch {
			deleted := it.Event != nil && it.Event.Type == opencode.EvSessionDeleted
			if it.Session == "" || deleted {
				if c.Trusted() {
					kept = append(kept, it)
				}
			} else if e, ok := c.Held(it.Session); ok && c.Holds(it.Session, e) {
				kept = append(kept, it)
			}
		}
		if len(kept) == 0 {
			continue
		}
		if err := c.send(kept); err != nil && c.ctx.Err() == nil {
			c.log.Warn("notify other instances", "err", err)
		}
	}
}

// send sends items in order, in as few notifications as fit the payload
// limit; only a single item over it is spilled.
func (c *cluster) send(items []item) error {
	body, err := json.Marshal(notice{Proc: c.proc, Items: items})
	if err != nil {
		return err
	}
	if len(body) > payloadLimit && len(items) > 1 {
		half := len(items) / 2
		if err := c.send(items[:half]); err != nil {
			return err
		}
		return c.send(items[half:])
	}
	ctx, cancel := c.s.bound(c.ctx)
	defer cancel()
	if len(body) > payloadLimit {
		var id int64
		if err := c.s.pool.QueryRow(ctx, `INSERT INTO relay_spill(body) VALUES($1) RETURNING id`, body).Scan(&id); err != nil {
			return err
		}
		if body, err = json.Marshal(notice{Proc: c.proc, Spill: id}); err != nil {
			return err
		}
	}
	_, err = c.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, string(body))
	return err
}

// listenLoop holds the LISTEN connection. When it breaks, events may have
// been missed: reset closes the event streams so their clients reconnect
// (session streams resume from their cursor), and it reconnects.
func (c *cluster) listenLoop() {
	defer c.wg.Done()
	for c.ctx.Err() == nil {
		err := c.listen()
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("event feed from other instances interrupted; reconnecting", "err", err)
		if c.hooks.Reset != nil {
			c.hooks.Reset()
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cluster) listen() error {
	ctx, cancel := c.s.bound(c.ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, c.listenCfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	// Listening now: the others may skip broadcasting while alone.
	hello, _ := json.Marshal(notice{Proc: c.proc, Hello: true})
	if _, err := c.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, string(hello)); err != nil {
		return err
	}
	cancel()
	// An instance that said hello before this LISTEN was up is counted
	// now, not at the next renewal: meanwhile this one would think itself
	// alone and not broadcast (a permission asked here never listed there).
	c.countPeers(c.ctx, c.Instance())
	for {
		n, err := c.notification(conn)
		if err != nil {
			return err
		}
		var nt notice
		if err := json.Unmarshal([]byte(n.Payload), &nt); err != nil {
			c.log.Warn("bad notification", "err", err)
			continue
		}
		if nt.Proc == c.proc {
			continue
		}
		if nt.Hello {
			c.peers.Store(max(c.peers.Load(), 1)) // counted again at the next renewal
			continue
		}
		if nt.Spill != 0 {
			var body []byte
			ctx, cancel := c.s.bound(c.ctx)
			err := c.s.pool.QueryRow(ctx, `SELECT body FROM relay_spill WHERE id = $1`, nt.Spill).Scan(&body)
			cancel()
			if err != nil {
				c.log.Warn("spilled notification", "id", nt.Spill, "err", err)
				continue // the poll catches the durable events up
			}
			if err := json.Unmarshal(body, &nt); err != nil {
				continue
			}
		}
		c.receive(nt.Items)
	}
}

// notification waits for the next notification on the LISTEN connection.
// A connection that stays quiet for a lease TTL is pinged: one cut off by a
// partition gets no error by itself (nothing is sent on it), and its
// notifications would be missed unnoticed; a failed ping ends it as a
// broken one (listenLoop resets and reconnects).
func (c *cluster) notification(conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		ctx, cancel := context.WithTimeout(c.ctx, c.ttl)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err == nil || c.ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return n, err
		}
		ctx, cancel = c.s.bound(c.ctx)
		err = conn.Ping(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("LISTEN connection quiet for %v and its ping failed: %w", c.ttl, err)
		}
	}
}

// tail is how far this instance delivered one remote session's log.
type tail struct {
	seq int64
	// lag is the session's last seq seen by the previous poll while this
	// instance was behind it (0: not behind).
	lag     int64
	touched time.Time
	// ahead holds durable events read from the log past seq, delivered as
	// their doorbells come (so live events keep their place between them).
	ahead []*opencode.Event
}

// receive delivers one notification's items in order.
func (c *cluster) receive(items []item) {
	c.tailMu.Lock()
	defer c.tailMu.Unlock()
	for i, it := range items {
		if it.Ack != "" {
			c.acked(it.Ack)
			continue
		}
		if it.Flush != "" {
			c.marked(it)
			continue
		}
		if it.Event != nil {
			w := it.Event
			c.hooks.Deliver(&opencode.Event{ID: w.ID, Type: w.Type, SessionID: it.Session, Directory: w.Directory,
				Version: w.Version, Data: w.Data})
			continue
		}
		if it.Seq == 0 {
			continue
		}
		if _, mine := c.Held(it.Session); mine {
			continue // this instance took the session over: it publishes it
		}
		t := c.seen[it.Session]
		if t == nil {
			// First word of this session: its log before this event was
			// read by whoever streams it (session streams replay the log).
			t = &tail{seq: it.Seq - 1}
			c.seen[it.Session] = t
		}
		t.touched = time.Now()
		if it.Seq <= t.seq {
			continue
		}
		if len(t.ahead) == 0 || t.ahead[len(t.ahead)-1].Seq < it.Seq {
			// Read up to the last doorbell of this session in the batch.
			upto := it.Seq
			for _, later := range items[i+1:] {
				if later.Session == it.Session && later.Event == nil && later.Seq > upto {
					upto = later.Seq
				}
			}
			c.readAhead(it.Session, t, upto)
		}
		for len(t.ahead) > 0 && t.ahead[0].Seq <= it.Seq {
			e := t.ahead[0]
			t.ahead = t.ahead[1:]
			t.seq = e.Seq
			c.hooks.Deliver(e)
		}
	}
}

// readAhead reads the session's log after what was delivered (or read
// ahead) up to seq upto; tailMu held.
func (c *cluster) readAhead(sessionID string, t *tail, upto int64) {
	from := t.seq
	if n := len(t.ahead); n > 0 {
		from = t.ahead[n-1].Seq
	}
	evs, err := c.s.Events(c.ctx, sessionID, from, int(upto-from))
	if err != nil {
		c.log.Warn("read log of another instance's session", "session", sessionID, "err", err)
		return
	}
	t.ahead = append(t.ahead, evs...)
}

// pollLoop is the fallback for lost doorbells: every second it compares
// the sessions this instance follows with their last seq, and catches up
// one that stayed behind across two polls. It also drops sessions quiet
// for ten minutes and old spilled payloads.
func (c *cluster) pollLoop() {
	defer c.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.poll()
		if time.Since(last) > spillAge {
			last = time.Now()
			ctx, cancel := c.s.bound(c.ctx)
			_, _ = c.s.pool.Exec(ctx, `DELETE FROM relay_spill WHERE at < now() - $1::interval`, interval(spillAge))
			_, _ = c.s.pool.Exec(ctx, `DELETE FROM instances WHERE expires_at < now() - interval '1 hour'`)
			cancel()
		}
	}
}

func (c *cluster) poll() {
	c.tailMu.Lock()
	defer c.tailMu.Unlock()
	ids := make([]string, 0, len(c.seen))
	for id, t := range c.seen {
		if _, mine := c.Held(id); mine || time.Since(t.touched) > 10*time.Minute {
			delete(c.seen, id)
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := c.s.bound(c.ctx)
	defer cancel()
	rows, err := c.s.pool.Query(ctx, `SELECT id, last_seq FROM sessions WHERE id = ANY($1)`, ids)
	if err != nil {
		return
	}
	type head struct {
		ID      string
		LastSeq int64
	}
	heads, err := pgx.CollectRows(rows, pgx.RowToStructByPos[head])
	if err != nil {
		return
	}
	for _, h := range heads {
		t := c.seen[h.ID]
		if h.LastSeq <= t.seq {
			t.lag = 0
			continue
		}
		if t.lag == 0 || t.seq >= t.lag {
			// Behind: give the doorbell a poll's time to ring.
			t.lag = h.LastSeq
			continue
		}
		c.readAhead(h.ID, t, h.LastSeq)
		for _, e := range t.ahead {
			t.seq = e.Seq
			c.hooks.Deliver(e)
		}
		t.ahead = nil
		t.lag = 0
	}
}

// flushWait bounds how long a flush waits for the other instances (an
// instance that died without leaving never acks).
const flushWait = time.Second

func (c *cluster) Flush(ctx context.Context, sessionID, directory string) {
	peers := int(c.peers.Load())
	if peers == 0 {
		return
	}
	token := randomID()
	acks := make(chan struct{}, peers)
	c.mu.Lock()
	c.flushes[token] = acks
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.flushes, token)
		c.mu.Unlock()
	}()
	select {
	case c.out <- item{Session: sessionID, Flush: token, Dir: directory}:
	case <-ctx.Done():
		return
	}
	timer := time.NewTimer(flushWait)
	defer timer.Stop()
	for range peers {
		select {
		case <-acks:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// marked answers another instance's flush once this instance's streams
// wrote out what was delivered before it (without holding up the feed).
func (c *cluster) marked(it item) {
	wait := func(context.Context) {}
	if c.hooks.Mark != nil {
		wait = c.hooks.Mark(it.Session, it.Dir)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, flushWait)
		wait(ctx)
		cancel()
		select {
		case c.out <- item{Ack: it.Flush}:
		case <-c.ctx.Done():
		}
	}()
}

func (c *cluster) acked(token string) {
	c.mu.Lock()
	ch := c.flushes[token]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
