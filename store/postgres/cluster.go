package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opencode-server/opencode-server/store"
)

// ClusterOptions make a Store one instance of several sharing the database
// (see store.Cluster).
type ClusterOptions struct {
	// Addr is the URL other instances forward this instance's sessions'
	// requests to.
	Addr string
	// TTL is the lease: an instance that has not renewed it for TTL is
	// dead, and its sessions may be claimed (3 s when zero). Every
	// database call without a deadline of its own gets three quarters
	// of it: an instance whose database stops answering stops trusting
	// its lease after that long anyway.
	TTL    time.Duration
	Logger *slog.Logger
}

// OpenCluster opens the database as one instance of a cluster: it joins
// (a lease row in instances, renewed every TTL/4) and starts the event
// feed between instances (LISTEN/NOTIFY as a doorbell, the log as the
// truth). A connection idle in a transaction for TTL/2 is ended by the
// server, so a frozen owner cannot keep a session's row locked past its
// lease.
func OpenCluster(ctx context.Context, dsn string, o ClusterOptions) (*Store, error) {
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(max(o.TTL/2, time.Second).Milliseconds(), 10)
	s, err := open(ctx, cfg, o.TTL*3/4)
	if err != nil {
		return nil, err
	}
	c := &cluster{s: s, addr: o.Addr, ttl: o.TTL, margin: o.TTL / 4, log: o.Logger, proc: randomID(),
		held: map[string]int64{}, seen: map[string]*tail{}, out: make(chan item, 4096), wake: make(chan struct{}, 1),
		listenCfg: cfg.ConnConfig.Copy()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.join(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.cl = c
	return s, nil
}

// Cluster returns the store's cluster side, nil if it was opened alone.
func (s *Store) Cluster() store.Cluster {
	if s.cl == nil {
		return nil
	}
	return s.cl
}

// Peers is how many other live instances this one knows of (0 when opened
// alone).
func (s *Store) Peers() int {
	if s.cl == nil {
		return 0
	}
	return int(s.cl.peers.Load())
}

func randomID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cluster is the instance's lease, the sessions it holds, and the event
// feed to and from the other instances.
type cluster struct {
	s      *Store
	addr   string
	ttl    time.Duration
	margin time.Duration
	log    *slog.Logger
	// proc tells this process's notifications from the others'.
	proc   string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// id is the current lease's instance ID; until is when this instance
	// stops trusting it (the last renewal's start + TTL - margin, on the
	// monotonic clock: a SIGSTOPped process wakes up past it).
	id    string
	until time.Time
	// held maps the sessions this instance owns to their epochs.
	held map[string]int64

	hooks    store.Hooks
	attached bool
	// flushes are this instance's Flush calls waiting for acks, by token.
	flushes   map[string]chan struct{}
	listenCfg *pgx.ConnConfig

	// peers counts the other live instances (renewLoop; a hello sets it):
	// alone, an instance broadcasts nothing.
	peers atomic.Int64

	out  chan item
	wake chan struct{}
	// tailMu serialises delivering other instances' events (the listener
	// and the fallback poll); seen is guarded by it.
	tailMu sync.Mutex
	seen   map[string]*tail
}

var _ store.Cluster = (*cluster)(nil)

const (
	qJoin  = `INSERT INTO instances(id, addr, expires_at) VALUES($1, $2, now() + $3::interval)`
	qRenew = `UPDATE instances SET expires_at = now() + $2::interval WHERE id = $1 AND expires_at > now()`
	// live is the condition "owner o's lease has not expired".
	qClaim = `UPDATE sessions s SET owner = $1, epoch = s.epoch + 1
		WHERE s.id = $2 AND (s.owner IS NULL OR s.owner = $1 OR NOT EXISTS
			(SELECT 1 FROM instances i WHERE i.id = s.owner AND i.expires_at > now()))
		RETURNING s.epoch`
	qOwner = `SELECT s.owner, COALESCE(i.addr, ''), COALESCE(i.expires_at > now(), false)
		FROM sessions s LEFT JOIN instances i ON i.id = s.owner WHERE s.id = $1`
	qOrphans = `WITH c AS (
			SELECT s.id FROM sessions s
			WHERE (s.open OR EXISTS (SELECT 1 FROM inputs n WHERE n.session_id = s.id AND n.state = 'pending'))
			AND (s.owner IS NULL OR NOT EXISTS
				(SELECT 1 FROM instances i WHERE i.id = s.owner AND i.expires_at > now()))
			ORDER BY s.ord LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE sessions s SET owner = $1, epoch = s.epoch + 1 FROM c WHERE s.id = c.id
		RETURNING s.id, s.epoch`
	qRelease = `UPDATE sessions SET owner = NULL WHERE id = $1 AND owner = $2 AND epoch = $3`
)

func interval(d time.Duration) string {
	return strconv.FormatInt(d.Microseconds(), 10) + " microseconds"
}

// join registers a new lease (a new instance ID) and starts the
// background work the first time.
func (c *cluster) join(ctx context.Context) error {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	id := "ins_" + randomID()
	start := time.Now()
	if _, err := c.s.pool.Exec(ctx, qJoin, id, c.addr, interval(c.ttl)); err != nil {
		return fmt.Errorf("postgres: join cluster: %w", err)
	}
	c.mu.Lock()
	c.id, c.until = id, start.Add(c.ttl-c.margin)
	c.mu.Unlock()
	c.countPeers(ctx, id)
	c.log.Info("joined cluster", "instance", id, "addr", c.addr, "lease", c.ttl)
	return nil
}

func (c *cluster) Attach(h store.Hooks) {
	c.mu.Lock()
	if c.attached {
		c.mu.Unlock()
		return
	}
	c.attached = true
	c.hooks = h
	c.flushes = map[string]chan struct{}{}
	c.mu.Unlock()
	c.wg.Add(4)
	go c.renewLoop()
	go c.sendLoop()
	go c.listenLoop()
	go c.pollLoop()
}

func (c *cluster) Instance() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// trusted reports whether the lease may still be relied on; c.mu held.
func (c *cluster) trusted() bool { return time.Now().Before(c.until) }

// Trusted is trusted with c.mu taken.
func (c *cluster) Trusted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trusted()
}

// countPeers refreshes peers.
func (c *cluster) countPeers(ctx context.Context, id string) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	var n int64
	if err := c.s.pool.QueryRow(ctx, `SELECT count(*) FROM instances WHERE expires_at > now() AND id <> $1`, id).Scan(&n); err == nil {
		c.peers.Store(n)
	}
}

// renewLoop renews the lease every TTL/4. A renewal that finds the lease
// expired in the database (this process was frozen or cut off past it) or
// that cannot reach the database past the trust deadline ends the lease:
// every session it held is dropped (others may have claimed them) and a
// new lease, with a new instance ID, is joined.
func (c *cluster) renewLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.ttl / 4)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		id := c.id
		c.mu.Unlock()
		start := time.Now()
		ctx, cancel := context.WithTimeout(c.ctx, c.ttl/2)
		tag, err := c.s.pool.Exec(ctx, qRenew, id, interval(c.ttl))
		cancel()
		if c.ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		switch {
		case err == nil && tag.RowsAffected() == 1:
			c.until = start.Add(c.ttl - c.margin)
			c.mu.Unlock()
			c.countPeers(c.ctx, id)
			continue
		case err != nil && c.trusted():
			c.mu.Unlock()
			c.log.Warn("lease renewal failed; retrying", "instance", id, "err", err)
			continue
		}
		// The lease is gone: nothing held may be used any more.
		c.until = time.Time{}
		c.held = map[string]int64{}
		lost := c.hooks.Lost
		c.mu.Unlock()
		c.log.Warn("lease lost: stopping every session this instance ran", "instance", id, "err", err)
		if lost != nil {
			lost()
		}
		for c.ctx.Err() == nil {
			if err := c.join(c.ctx); err == nil {
				break
			} else {
				c.log.Warn("rejoin failed; retrying", "err", err)
			}
			select {
			case <-c.ctx.Done():
			case <-time.After(c.ttl / 4):
			}
		}
	}
}

func (c *cluster) Claim(ctx context.Context, sessionID string) (int64, error) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	c.mu.Lock()
	id, ok := c.id, c.trusted()
	c.mu.Unlock()
	if !ok {
		return 0, store.ErrFenced
	}
	var epoch int64
	err := c.s.pool.QueryRow(ctx, qClaim, id, sessionID).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		inst, addr, live, oerr := c.owner(ctx, sessionID)
		if oerr != nil {
			return 0, oerr
		}
		if !live { // its lease expired just now: try once more
			if err = c.s.pool.QueryRow(ctx, qClaim, id, sessionID).Scan(&epoch); err == nil {
				return c.hold(id, sessionID, epoch)
			}
		}
		return 0, &store.OwnedError{Instance: inst, Addr: addr}
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: claim: %w", err)
	}
	return c.hold(id, sessionID, epoch)
}

// hold records a session claimed under lease id, unless that lease ended
// meanwhile (then the claim is as good as fenced).
func (c *cluster) hold(id, sessionID string, epoch int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id != id {
		return 0, store.ErrFenced
	}
	c.held[sessionID] = epoch
	return epoch, nil
}

func (c *cluster) owner(ctx context.Context, sessionID string) (inst, addr string, live bool, err error) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	var owner *string
	err = c.s.pool.QueryRow(ctx, qOwner, sessionID).Scan(&owner, &addr, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, store.ErrNotFound
	}
	if err != nil {
		return "", "", false, fmt.Errorf("postgres: owner: %w", err)
	}
	if owner == nil {
		return "", "", false, nil
	}
	return *owner, addr, live, nil
}

func (c *cluster) Owner(ctx context.Context, sessionID string) (string, error) {
	inst, addr, live, err := c.owner(ctx, sessionID)
	if err != nil || !live || inst == c.Instance() {
		return "", err
	}
	return addr, nil
}

func (c *cluster) Held(sessionID string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[sessionID]
	return e, ok
}

func (c *cluster) Holds(sessionID string, epoch int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[sessionID]
	return ok && e == epoch && c.trusted()
}

// fence checks, inside a commit's transaction with the session's row
// locked, that this instance still owns it under the epoch it claimed.
func (c *cluster) fence(sessionID string, owner *string, epoch int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[sessionID]
	if !ok || owner == nil || *owner != c.id || epoch != e || !c.trusted() {
		return store.ErrFenced
	}
	return nil
}

func (c *cluster) Release(ctx context.Context, sessionID string, epoch int64) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	c.mu.Lock()
	id := c.id
	if e, ok := c.held[sessionID]; ok && e == epoch {
		delete(c.held, sessionID)
	} else {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if _, err := c.s.pool.Exec(ctx, qRelease, sessionID, id, epoch); err != nil {
		c.log.Warn("release session", "session", sessionID, "err", err)
	}
}

func (c *cluster) ClaimOrphans(ctx context.Context, limit int) ([]string, error) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	c.mu.Lock()
	id, ok := c.id, c.trusted()
	c.mu.Unlock()
	if !ok {
		return nil, nil
	}
	rows, err := c.s.pool.Query(ctx, qOrphans, id, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim orphans: %w", err)
	}
	type claimed struct {
		ID    string
		Epoch int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claimed])
	if err != nil {
		return nil, fmt.Errorf("postgres: claim orphans: %w", err)
	}
	out := make([]string, 0, len(got))
	for _, g := range got {
		if _, err := c.hold(id, g.ID, g.Epoch); err == nil {
			out = append(out, g.ID)
		}
	}
	return out, nil
}

func (c *cluster) Running(ctx context.Context) ([]string, error) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	rows, err := c.s.pool.Query(ctx, `SELECT id FROM sessions WHERE open AND owner IS DISTINCT FROM $1`, c.Instance())
	if err != nil {
		return nil, fmt.Errorf("postgres: running sessions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: running sessions: %w", err)
	}
	return ids, nil
}

func (c *cluster) Leave(ctx context.Context) {
	ctx, cancel := c.s.bound(ctx)
	defer cancel()
	c.mu.Lock()
	id := c.id
	c.held = map[string]int64{}
	c.until = time.Time{}
	c.mu.Unlock()
	if _, err := c.s.pool.Exec(ctx, `UPDATE sessions SET owner = NULL WHERE owner = $1`, id); err != nil {
		c.log.Warn("leave: release sessions", "err", err)
	}
	if _, err := c.s.pool.Exec(ctx, `DELETE FROM instances WHERE id = $1`, id); err != nil {
		c.log.Warn("leave: end lease", "err", err)
	}
}

// stop ends the background work (Store.Close).
func (c *cluster) stop() {
	c.cancel()
	c.wg.Wait()
}
