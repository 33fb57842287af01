// Package lifecycle is the core: one runner goroutine per active session owns
// that session's mutable state (inbox, running turn, conversation) and is the
// single writer of its store rows and event log. HTTP handlers talk to a
// runner only through Manager's methods, which send it commands.
//
// Lock order (the whole of it: locksordering.txt): Manager.mu is never held
// while sending to a runner; in a cluster the relay's tailMu is above
// Manager.mu, which is above cluster.mu; the store's and the bus's own
// locks are leaves.
package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/snapshot"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/tool"
)

// Config wires a Manager.
type Config struct {
	Store store.Store
	Bus   *eventbus.Bus
	// Provider answers model calls; ProviderID/ModelID name the default model.
	Provider   provider.Provider
	ProviderID string
	ModelID    string
	// Resolve finds the provider of a model a prompt names; nil or a miss
	// means Provider.
	Resolve func(providerID, modelID string) (provider.Provider, bool)
	// Tools are offered to the model; Rules are the configured permission
	// rules (applied after DefaultRules, before the session's own).
	Tools []tool.Tool
	// MoreTools, if set, are tools that come and go while the server runs
	// (the connected MCP servers'), offered after Tools.
	// ReadResource reads an MCP resource a prompt's file part names (nil:
	// no MCP servers).
	ReadResource func(ctx context.Context, client, uri string) ([]ResourceContent, error)
	MoreTools    func() []tool.Tool
	Rules        []Rule
	// Catalog describes the models: their price (a miss: free), context
	// window (0 or a miss: none; such a model is never compacted
	// automatically) and output limit (0 or a miss: none; else a model
	// call asks for at most that many tokens, capped as OpenCode caps it).
	// nil: no model is known.
	Catalog *catalog.Live
	// ProjectOf is the ID of the project a directory belongs to, as
	// OpenCode identifies it (vcs), and its work tree (a session's path is
	// relative to it); nil or "": "global", the file system's root.
	ProjectOf func(ctx context.Context, dir string) (id, worktree string)
	// Directory is the default working directory of new sessions.
	Directory string
	// Snapshots records project files at each step (revert, step
	// snapshots); nil records nothing.
	Snapshots *snapshot.Snapshots
	// IdleTimeout is how long a runner with nothing to do stays in memory
	// (5 minutes when zero); the next command for its session starts a new
	// one from the store.
	IdleTimeout time.Duration
	// StoreTimeout bounds each commit of a session's runner (10 s when
	// zero; in a cluster less than the lease, which is not trusted longer):
	// a database that stops answering fails the commit instead of holding
	// the session.
	StoreTimeout time.Duration
	// Clock is the time source (time.Now when nil).
	Clock func() time.Time
	// Home and ConfigDir (~/.config/opencode) are where global
	// instructions and skills are looked for; Instructions is the config's
	// `instructions`; NoClaude and NoProject are OpenCode's
	// OPENCODE_DISABLE_CLAUDE_CODE_PROMPT and OPENCODE_DISABLE_PROJECT_CONFIG.
	Home, ConfigDir string
	// SmallProviderID/SmallModelID name the model that writes session
	// titles (config small_model); empty: the turn's model.
	SmallProviderID, SmallModelID string
	Instructions                  []string
	NoClaude, NoProject           bool
	// Agents are the server's agents (agent.Resolve); nil: the built-in ones.
	Agents []agent.Agent
	// IDs mints the IDs the core creates (assistant messages, parts,
	// events, forked sessions): the process-wide generator when nil.
	IDs *identifier.Generator
	// Cluster, if set, makes this manager one instance of several sharing
	// the store (see cluster.go); it is the store's cluster side.
	Cluster store.Cluster
	Logger  *slog.Logger
	// ExternalIdle is how long an external agent's process stays after
	// its session's last turn (10 minutes when zero); MaxExternal bounds
	// how many run at once (16 when zero).
	ExternalIdle time.Duration
	MaxExternal  int
	// MCPServers are the enabled MCP servers of the config, passed to
	// external agents in session/new (external_mcp.go).
	MCPServers []MCPServer
}

// Manager owns the runners.
type Manager struct {
	cfg    Config
	store  store.Store
	bus    *eventbus.Bus
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	specs []provider.ToolSpec

	mu      sync.Mutex
	runners map[string]*runner
	busy    map[string]bool
	// failed are the sessions stopped after a failed write, retried in
	// the background (see storeFailure).
	failed map[string]*storeFailure
	pace   failPace
	// loading are the sessions whose runner is being started: a second
	// request waits for the first instead of loading (and, in a cluster,
	// claiming under a newer epoch, which fences the first) again.
	loading map[string]chan struct{}
	// remotePerms and remoteQuestions are the pending asks of sessions
	// other instances run (cluster mode).
	remotePerms     map[string]opencode.PermissionRequest
	remoteQuestions map[string]opencode.QuestionRequest
	cl              store.Cluster
	asks            map[string]*pendingAsk
	// questions are the question tool calls waiting for the user.
	questions map[string]*pendingQuestion
	closed    bool
	ids       *identifier.Generator

	// filesMu guards files, the instruction and skill files found per
	// directory (see projectFiles).
	filesMu sync.Mutex
	files   map[string]foundFiles
	// relMu guards relTimer, the pending memory release (see releaseMemory).
	relMu    sync.Mutex
	relTimer *time.Timer
	// ext are the external agents' processes.
	ext externals
}

// errEvicted is why a runner that went idle stopped; callers retry.
var errEvicted = errors.New("runner evicted")

// ErrClosed is returned once the manager is shutting down.
var ErrClosed = &opencode.Error{Code: opencode.EUnavailable, Message: "server is shutting down"}

// New returns a Manager. Call Close to stop its runners.
func New(cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Agents == nil {
		cfg.Agents = agent.Builtin
	}
	if cfg.IDs == nil {
		cfg.IDs = identifier.Default()
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.ExternalIdle <= 0 {
		cfg.ExternalIdle = defaultExternalIdle
	}
	if cfg.MaxExternal <= 0 {
		cfg.MaxExternal = defaultMaxExternal
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The store and cluster through the one mapping of their outages
	// (storeerr.go): no read or write of the core lets a raw one out.
	var cl store.Cluster
	if cfg.Cluster != nil {
		cl = mappedCluster{cfg.Cluster}
	}
	m := &Manager{cfg: cfg, store: mappedStore{cfg.Store}, bus: cfg.Bus, log: cfg.Logger, ctx: ctx, cancel: cancel,
		runners: map[string]*runner{}, busy: map[string]bool{}, failed: map[string]*storeFailure{},
		pace: failPace{failRetryFirst, failRetryMax, failTryEvery}, loading: map[string]chan struct{}{}, cl: cl,
		remotePerms: map[string]opencode.PermissionRequest{}, remoteQuestions: map[string]opencode.QuestionRequest{}, asks: map[string]*pendingAsk{}, questions: map[string]*pendingQuestion{},
		specs: toolSpecs(cfg.Tools), ids: cfg.IDs}
	m.ext = externals{m: m, procs: map[string]*extProc{}}
	if m.cl != nil {
		m.cl.Attach(store.Hooks{Deliver: m.relay, Lost: m.lost, Reset: m.bus.Reset, Mark: m.mark})
	}
	return m
}

// Resume starts the runners of sessions that have pending inputs or a turn
// that a crash or shutdown cut off, so they are closed, continued and
// drained without waiting for a client.
func (m *Manager) Resume(ctx context.Context) error {
	if m.cl != nil {
		// One of several instances: only sessions whose owner is gone,
		// now and from now on.
		if err := m.sweep(ctx); err != nil {
			return err
		}
		m.wg.Add(1)
		go m.sweepLoop()
		return nil
	}
	// Only the sessions a crash or shutdown left open (flagged when a turn
	// starts, cleared when it ends) or with pending inputs: start-up does
	// not read every history.
	ids, err := m.store.OpenSessions(ctx)
	if err != nil {
		return err
	}
	// And those a crash left inside a revert or unrevert (their runner
	// finishes it).
	for _, id := range m.cfg.Snapshots.Intents() {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		if err := m.resume(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// resume starts one session's runner, which closes what a crash left
// open and picks up pending work.
func (m *Manager) resume(ctx context.Context, id string) error {
	if _, err := m.runner(ctx, id); err != nil {
		if !storeDown(err) {
			return err
		}
		// Its reads failed (a deadline just after a start): retried in
		// the background as a failed commit is, not left for a request.
		m.storeFailed(id, 0, err)
		return nil
	}
	if _, _, _, failing := m.StoreRetry(id); failing {
		// Stopped after failed writes: its runner, just started, clears
		// that once it has read the store, or it is retried in the
		// background (and logged there); nothing to say here.
		return nil
	}
	// A session flagged open with nothing left to do (an older store,
	// or a turn whose end was its last commit) is cleared.
	err := m.do(ctx, id, func(r *runner) {
		if r.turn == nil && len(r.pending) == 0 {
			closed := false
			r.outbox().batch.Open = &closed
		}
	})
	if _, _, _, failing := m.StoreRetry(id); failing && storeDown(err) {
		return nil // as above: the failure that stopped it is retried
	}
	return err
}

// Drain waits until no turn runs, or ctx ends (the shutdown grace period).
// Turns keep running and starting meanwhile: a session's queue drains as
// far as the grace period allows; Close then interrupts what still runs.
func (m *Manager) Drain(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		n := len(m.busy)
		m.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Close stops every runner (a running turn is closed as interrupted) and
// waits for their goroutines. The store is the caller's to close.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	// No external agent outlives the server; a prompt waiting on one
	// returns once its process is gone.
	m.ext.closeAll()
	m.wg.Wait()
	if m.cl != nil {
		// Others take this instance's sessions over at once.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m.cl.Leave(ctx)
		cancel()
	}
}

func (m *Manager) now() int64 { return m.cfg.Clock().UnixMilli() }

// runner returns the session's runner, starting it if needed.
func (m *Manager) runner(ctx context.Context, id string) (*runner, error) {
	return m.ensure(ctx, id, func() (*state, error) { return m.load(ctx, id) })
}

// ensure returns the session's runner, starting one from mk's state if
// none runs; one request at a time makes the state (the others wait for
// it and take its runner), so no two claims of the session race.
func (m *Manager) ensure(ctx context.Context, id string, mk func() (*state, error)) (*runner, error) {
	for {
		m.mu.Lock()
		r := m.runners[id]
		closed := m.closed
		wait, busy := m.loading[id]
		if !closed && r == nil && !busy {
			wait = make(chan struct{})
			m.loading[id] = wait
		}
		m.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case r != nil:
			return r, nil
		case busy:
			select {
			case <-wait:
				continue // started (or failed): look again
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		st, err := mk()
		if err == nil {
			r, err = m.adopt(st)
		}
		m.mu.Lock()
		delete(m.loading, id)
		m.mu.Unlock()
		close(wait)
		return r, err
	}
}

// adopt starts the runner of a loaded session, unless one runs already.
func (m *Manager) adopt(st *state) (*runner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if r := m.runners[st.sess.ID]; r != nil {
		return r, nil
	}
	if m.cl != nil && st.epoch == 0 {
		st.epoch, _ = m.cl.Held(st.sess.ID) // created here: the store made it ours
	}
	r := newRunner(m, st)
	m.runners[st.sess.ID] = r
	m.wg.Add(1)
	go r.loop()
	return r, nil
}

func (m *Manager) forget(r *runner) {
	m.mu.Lock()
	if m.runners[r.id] == r {
		delete(m.runners, r.id)
	}
	delete(m.busy, r.id)
	m.mu.Unlock()
}

func (m *Manager) setBusy(id string, busy bool) {
	m.mu.Lock()
	if busy {
		m.busy[id] = true
	} else {
		delete(m.busy, id)
	}
	m.mu.Unlock()
}

// do runs f on the session's runner goroutine and waits for it. Once the
// command is handed over it runs to completion even if ctx ends, so an
// admission a client stopped waiting for is never half done.
func (m *Manager) do(ctx context.Context, sessionID string, f func(r *runner)) error {
	for {
		if err := m.failedErr(sessionID); err != nil {
			return err // the background retry brings it back
		}
		r, err := m.runner(ctx, sessionID)
		if err != nil {
			return err
		}
		// state: 0 handed over, 1 run (f started), 2 withdrawn (the caller
		// gave up before f started: f never runs, so nothing it writes
		// races with the caller).
		var state atomic.Int32
		fin := make(chan struct{})
		c := command{done: make(chan struct{})}
		c.f = func() {
			if state.CompareAndSwap(0, 1) {
				defer close(fin)
				f(r)
			}
		}
		select {
		case r.cmds <- c:
		case <-r.done:
			if r.exit == errEvicted || r.failure != nil {
				// It went idle and let go, or stopped after a failed
				// commit: a fresh runner takes over from the store.
				continue
			}
			return r.exitErr()
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			if state.CompareAndSwap(0, 2) {
				return ctx.Err() // withdrawn: f never runs
			}
			// f started: it runs no blocking I/O, so wait for it to end
			// (its results are written then), not for its commit.
			select {
			case <-fin:
			case <-r.done:
			}
			select {
			case <-c.done:
				return nil
			default:
				return ctx.Err()
			}
		case <-r.done:
			// The runner may have run f just before exiting (delete does).
			select {
			case <-c.done:
				return nil
			default:
			}
			ran := state.Load() == 1
			if r.failure != nil && ran {
				return r.exit // f ran, but what it did could not be stored
			}
			if ran {
				return nil
			}
			if r.exit == errEvicted || r.failure != nil {
				continue // f never ran: a fresh runner takes it
			}
			return r.exitErr()
		}
	}
}

// mapStoreErr turns a store's answer about session sessionID (not found,
// conflict) into a core error that says what it was about, keeping the
// store's error as its cause (for the log). Outages are mapped already,
// as the store gave them (storeErr).
func mapStoreErr(err error, sessionID string) error {
	var oe *opencode.Error
	var pc *store.PartConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return err
	case errors.As(err, &pc):
		return &opencode.Error{Code: opencode.EConflict, SessionID: sessionID, Resource: pc.ID,
			Message: "Part ID " + pc.ID + " is already in use", Cause: err}
	case errors.Is(err, store.ErrNotFound):
		e := opencode.SessionNotFound(sessionID)
		e.Cause = err
		return e
	case errors.Is(err, store.ErrConflict):
		return &opencode.Error{Code: opencode.EConflict, SessionID: sessionID, Resource: "session",
			Message: "Session " + sessionID + " changed under this request: " + err.Error(), Cause: err}
	}
	return err
}

// CreateSession stores a new session and publishes session.created. If a
// session with opts.ID exists it is returned unchanged with created=false.
func (m *Manager) CreateSession(ctx context.Context, opts opencode.SessionOptions) (s opencode.Session, created bool, err error) {
	if !opts.Minted {
		if existing, err := m.store.GetSession(ctx, opts.ID); err == nil {
			return existing, false, nil
		}
	}
	now := m.now()
	dir := opts.Directory
	if dir == "" {
		dir = m.cfg.Directory
	}
	title := opts.Title
	if title == "" {
		title = defaultTitlePrefix + time.UnixMilli(now).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	project := "global" // every directory outside git, as in OpenCode
	path := strings.TrimPrefix(dir, "/")
	if m.cfg.ProjectOf != nil {
		if id, worktree := m.cfg.ProjectOf(ctx, dir); id != "" {
			project = id
			// OpenCode's path: the directory relative to its work tree
			// ("" at its root; outside git the root is "/").
			if rel, err := filepath.Rel(worktree, dir); worktree != "" && err == nil && !strings.HasPrefix(rel, "..") {
				path = filepath.ToSlash(rel)
				if path == "." {
					path = ""
				}
			}
		}
	}
	s = opencode.Session{ID: opts.ID, Slug: slug(opts.ID), ProjectID: project, WorkspaceID: opts.WorkspaceID, Directory: dir,
		Path: path, ParentID: opts.ParentID, Title: title, Agent: opts.Agent, Model: opts.Model,
		Version: opencode.Version, Permission: opts.Permission, Metadata: opts.Metadata,
		Time: opencode.SessionTime{Created: now, Updated: now}}
	if err := m.store.Commit(ctx, s.ID, &store.Batch{Session: &s, CreateOnly: true}); errors.Is(err, store.ErrConflict) {
		// A concurrent create of the same client-chosen ID won: answer with it.
		existing, err := m.store.GetSession(ctx, opts.ID)
		return existing, false, mapStoreErr(err, opts.ID)
	} else if err != nil {
		return opencode.Session{}, false, mapStoreErr(err, s.ID)
	}
	m.publish(m.liveEvent(s.ID, s.Directory, opencode.SessionCreated{SessionID: s.ID, Info: s}))
	// Its runner needs nothing from the store: a new session has no
	// history, no inbox and no log yet. Its first prompt reads nothing.
	// Started through ensure: a concurrent first request for the same ID
	// takes this runner, or this takes its, instead of two claims racing.
	_, _ = m.ensure(context.WithoutCancel(ctx), s.ID, func() (*state, error) { return &state{sess: s}, nil })
	return s, true, nil
}

const defaultTitlePrefix = "New session - "

var slugWords = [...]string{"happy", "quiet", "brave", "calm", "swift", "bright", "gentle", "bold",
	"harbor", "meadow", "river", "forest", "canyon", "island", "garden", "summit"}

// slug derives a stable two-word slug from the session ID's random tail.
func slug(id string) string {
	if len(id) < 2 {
		return "session"
	}
	a, b := id[len(id)-1], id[len(id)-2]
	return slugWords[int(a)%8] + "-" + slugWords[8+int(b)%8]
}

// GetSession returns a session.
func (m *Manager) GetSession(ctx context.Context, id string) (opencode.Session, error) {
	s, err := m.store.GetSession(ctx, id)
	return s, mapStoreErr(err, id)
}

// ListSessions returns sessions, most recently updated first.
func (m *Manager) ListSessions(ctx context.Context) ([]opencode.Session, error) {
	all, err := m.store.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Updated > all[j].Time.Updated })
	return all, nil
}

// UpdateSession applies p on the session's runner and publishes session.updated.
func (m *Manager) UpdateSession(ctx context.Context, id string, p opencode.SessionPatch) (opencode.Session, error) {
	var out opencode.Session
	var err error
	if derr := m.do(ctx, id, func(r *runner) { out, err = r.update(p) }); derr != nil {
		return out, derr
	}
	return out, err
}

// DeleteSession aborts the session's turn, removes it with all its data and
// publishes session.deleted.
func (m *Manager) DeleteSession(ctx context.Context, id string) error {
	var err error
	if derr := m.do(ctx, id, func(r *runner) { err = r.delete() }); derr != nil {
		return derr
	}
	return err
}

// Messages returns the session's messages in creation order.
func (m *Manager) Messages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error) {
	msgs, err := m.store.ListMessages(ctx, sessionID)
	return msgs, mapStoreErr(err, sessionID)
}

// Message returns one message of a session.
func (m *Manager) Message(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error) {
	if _, err := m.GetSession(ctx, sessionID); err != nil {
		return opencode.MessageWithParts{}, err
	}
	mp, err := m.store.GetMessage(ctx, sessionID, messageID)
	if errors.Is(err, store.ErrNotFound) {
		return mp, opencode.MessageNotFound(sessionID, messageID)
	}
	return mp, err
}

// Status returns the sessions that are not idle.
func (m *Manager) Status() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.busy))
	for id := range m.busy {
		out[id] = "busy"
	}
	return out
}

// Events returns a session's durable events with seq > after.
func (m *Manager) Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	evs, err := m.store.Events(ctx, sessionID, after, limit)
	return evs, mapStoreErr(err, sessionID)
}

// Subscribe subscribes to the live bus.
func (m *Manager) Subscribe(buf int, filter func(*opencode.Event) bool) *eventbus.Subscription {
	return m.bus.Subscribe(buf, filter)
}

// Flushed waits until every subscriber that receives the session's events
// has written out what it was sent up to the turn's last event (res.Pos),
// or ctx ends. Streams of other sessions and directories are not waited
// for, nor one that stopped reading (see eventbus.WaitDelivered); the
// directory comes with res, so this reads nothing.
//
// In a cluster the streams of every other live instance are waited for
// too (the client's event stream may be on any of them): see
// store.Cluster.Flush.
func (m *Manager) Flushed(ctx context.Context, res opencode.Result, sessionID string) {
	m.bus.WaitDelivered(ctx, res.Pos, &opencode.Event{SessionID: sessionID, Directory: res.Directory, Durable: true})
	if m.cl != nil {
		m.cl.Flush(ctx, sessionID, res.Directory)
	}
}

// mark returns a wait for this instance's streams that receive a
// session's events to write out what the bus has carried so far (another
// instance's flush, see Flushed).
func (m *Manager) mark(sessionID, dir string) func(ctx context.Context) {
	pos := m.bus.Position()
	return func(ctx context.Context) {
		m.bus.WaitDelivered(ctx, pos, &opencode.Event{SessionID: sessionID, Directory: dir, Durable: true})
	}
}

// publish puts an event on this instance's bus and, in a cluster, hands it
// to the other instances.
func (m *Manager) publish(e *opencode.Event) int64 {
	pos := m.bus.Publish(e)
	if m.cl != nil {
		m.cl.Broadcast(e)
	}
	return pos
}

// MessagesPage reads one page of a session's messages (see
// store.MessagesPage); an unknown anchor is an EInvalid error.
func (m *Manager) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	if _, err := m.GetSession(ctx, sessionID); err != nil {
		return nil, err
	}
	page, err := m.store.MessagesPage(ctx, sessionID, q)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &opencode.Error{Code: opencode.EInvalid, Message: "Invalid cursor: no message " + q.Anchor + " in this session"}
	}
	return page, err
}
