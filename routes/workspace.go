package routes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// OpenCode's experimental workspaces (1.18.33's control-plane Workspace
// service) with its one built-in adapter, "worktree": a workspace is a git
// worktree of the project under $XDG_DATA_HOME/opencode/worktree/<id>,
// detached or on a branch the client names, whose target is local (its
// directory), so it is always "connected" while its directory exists.
// Remote adapters come from plugins (OpenCode's cloud workspaces); there
// are none here.
//
// As in OpenCode, the feature is behind OPENCODE_EXPERIMENTAL_WORKSPACES
// (else OPENCODE_EXPERIMENTAL; Config.Workspaces): without it the list and
// the status are empty and a create makes the worktree but answers
// WorkspaceCreateError "Timed out waiting for global event" (OpenCode waits
// 5 s for a status its sync never sends; ours answers at once).
//
// The workspaces live in memory (OpenCode keeps them in its database);
// after a restart POST /experimental/workspace/sync-list registers the
// project's worktrees again.

// workspacePrefix is the prefix of workspace IDs.
const workspacePrefix identifier.Prefix = "wrk"

// Workspace is OpenCode's Workspace.
type Workspace struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Branch    *string         `json:"branch"`
	Directory *string         `json:"directory"`
	Extra     json.RawMessage `json:"extra"`
	ProjectID string          `json:"projectID"`
	TimeUsed  int64           `json:"timeUsed"`
}

// workspaces is every workspace created or registered, and the
// connection status of those a sync started.
type workspaces struct {
	mu     sync.Mutex
	rows   []Workspace
	status map[string]string // workspace ID -> connected, error, ...
	booted map[string]bool   // directories the project copy routes served
}

func (ws *workspaces) add(w Workspace) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if slices.ContainsFunc(ws.rows, func(x Workspace) bool { return x.ID == w.ID }) {
		return &opencode.Error{Code: opencode.EConflict, Message: "Workspace already exists: " + w.ID}
	}
	ws.rows = append(ws.rows, w)
	return nil
}

func (ws *workspaces) get(id string) (Workspace, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	i := slices.IndexFunc(ws.rows, func(x Workspace) bool { return x.ID == id })
	if i < 0 {
		return Workspace{}, false
	}
	return ws.rows[i], true
}

// of are a project's workspaces, by ID.
func (ws *workspaces) of(projectID string) []Workspace {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := []Workspace{}
	for _, w := range ws.rows {
		if w.ProjectID == projectID {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b Workspace) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (ws *workspaces) remove(id string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.rows = slices.DeleteFunc(ws.rows, func(x Workspace) bool { return x.ID == id })
	delete(ws.status, id)
}

// setStatus records a workspace's connection status; false when it had
// that one already.
func (ws *workspaces) setStatus(id, status string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.status == nil {
		ws.status = map[string]string{}
	}
	if ws.status[id] == status {
		return false
	}
	ws.status[id] = status
	return true
}

func (ws *workspaces) statusOf(id string) (string, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	st, ok := ws.status[id]
	return st, ok
}

// ExperimentalFlag reads one of OpenCode's experimental switches as it
// does: the variable name when it is a boolean (true/false, yes/no,
// on/off, 1/0, y/n), else OPENCODE_EXPERIMENTAL. getenv nil is os.Getenv.
func ExperimentalFlag(getenv func(string) string, name string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if v, ok := parseFlag(getenv(name)); ok {
		return v
	}
	v, _ := parseFlag(getenv("OPENCODE_EXPERIMENTAL"))
	return v
}

func parseFlag(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1", "y":
		return true, true
	case "false", "no", "off", "0", "n":
		return false, true
	}
	return false, false
}

// workspaceAdapters are the adapters a project can make workspaces with.
var workspaceAdapters = []map[string]string{{"type": "worktree", "name": "Worktree", "description": "Create a git worktree"}}

func (s *Server) mountWorkspaces(r chi.Router) {
	r.Get("/experimental/workspace/adapter", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		if _, _, err := s.projects.reg.Open(r.Context(), s.directory(r)); err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, workspaceAdapters)
		return nil
	}))
	r.Get("/experimental/workspace", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, _, err := s.projects.reg.Open(r.Context(), s.directory(r))
		if err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, s.listWorkspaces(p.ID))
		return nil
	}))
	r.Get("/experimental/workspace/status", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, _, err := s.projects.reg.Open(r.Context(), s.directory(r))
		if err != nil {
			return s.gitError(r, err)
		}
		type connection struct {
			WorkspaceID string `json:"workspaceID"`
			Status      string `json:"status"`
		}
		out := []connection{}
		for _, ws := range s.listWorkspaces(p.ID) {
			if st, ok := s.workspaces.statusOf(ws.ID); ok {
				out = append(out, connection{ws.ID, st})
			}
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}))
	r.Post("/experimental/workspace", s.h(v1, s.createWorkspace))
	r.Post("/experimental/workspace/sync-list", s.h(v1, s.syncWorkspaceList))
	r.Post("/experimental/workspace/warp", s.h(v1, s.warpSession))
	r.Delete("/experimental/workspace/{id}", s.h(v1, s.removeWorkspace))
}

// routeWorkspace serves a request that names a workspace (?workspace=;
// on /api routes location[workspace] too: what the SDK sends for a client
// with a workspace) in that workspace's directory, as OpenCode's workspace
// routing serves one of a local workspace. The workspace routes and GET
// /session are served where the request says, as in OpenCode. An unknown
// workspace is a 400 (OpenCode: a 500 text).
func (s *Server) routeWorkspace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		id, api := q.Get("workspace"), isV2(r)
		if id == "" && api {
			id = q.Get("location[workspace]")
		}
		p := r.URL.Path
		if id == "" || p == "/experimental/workspace" || strings.HasPrefix(p, "/experimental/workspace/") ||
			(r.Method == http.MethodGet && p == "/session") {
			next.ServeHTTP(w, r)
			return
		}
		fam := v1
		if api {
			fam = v2
		}
		if api && !strings.HasPrefix(id, string(workspacePrefix)) {
			writeError(w, r, fam, s.log, badRequest("Query", "workspace", "Invalid workspace query parameter"))
			return
		}
		ws, ok := s.workspaces.get(id)
		if !ok {
			writeError(w, r, fam, s.log, badRequest("Query", "workspace", "Workspace not found: "+id))
			return
		}
		if ws.Directory == nil {
			next.ServeHTTP(w, r)
			return
		}
		q.Set("directory", *ws.Directory)
		q.Del("location[directory]")
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		r2.Header.Del("x-opencode-directory")
		next.ServeHTTP(w, r2)
	})
}

// listWorkspaces is OpenCode's Workspace.list: none without the flag.
func (s *Server) listWorkspaces(projectID string) []Workspace {
	if !s.cfg.Workspaces {
		return []Workspace{}
	}
	return s.workspaces.of(projectID)
}

// workspaceError is a 400 in one of the workspace routes' named shapes
// (WorkspaceCreateError, WorkspaceWarpError).
func workspaceError(w http.ResponseWriter, name, msg string) error {
	writeJSON(w, http.StatusBadRequest, map[string]any{"name": name, "data": map[string]any{"message": msg}})
	return nil
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID     *string         `json:"id"`
		Type   *string         `json:"type"`
		Branch *string         `json:"branch"`
		Extra  json.RawMessage `json:"extra"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	if body.Type == nil {
		return badRequest("Payload", "type", `Missing key at ["type"]`)
	}
	id := ""
	if body.ID != nil {
		if err := checkID(workspacePrefix, *body.ID, "id"); err != nil {
			return err
		}
		id = *body.ID
	}
	if *body.Type != "worktree" {
		return workspaceError(w, "WorkspaceCreateError", "Unknown workspace adapter: "+*body.Type)
	}
	ctx := detach(r.Context()) // a worktree half made is not left so because the client went away
	p, ident, err := s.projects.reg.Open(ctx, s.directory(r))
	if err != nil {
		return s.gitError(r, err)
	}
	branch := ""
	if body.Branch != nil {
		branch = *body.Branch
	}
	wt, err := vcs.NewWorkspaceWorktree(ident, branch)
	if err != nil {
		return s.workspaceCreateFailed(w, r, err)
	}
	if id == "" {
		id = s.ids.Ascending(workspacePrefix)
	}
	ws := Workspace{ID: id, Type: "worktree", Name: wt.Name, Directory: &wt.Directory, Extra: nullIfEmpty(body.Extra),
		ProjectID: p.ID, TimeUsed: s.now()}
	if branch != "" {
		ws.Branch = &branch
	}
	// Recorded before the worktree is made, as OpenCode inserts the row
	// first: a worktree git refuses leaves the workspace behind.
	if err := s.workspaces.add(ws); err != nil {
		return workspaceError(w, "WorkspaceCreateError", err.Error())
	}
	if err := vcs.CreateWorkspaceWorktree(ctx, ident, wt); err != nil {
		return s.workspaceCreateFailed(w, r, err)
	}
	if err := s.projects.reg.AddSandbox(p.ID, wt.Directory); err != nil {
		return err
	}
	if _, _, err := s.projects.reg.Open(ctx, wt.Directory); err != nil {
		return s.gitError(r, err)
	}
	ready := map[string]any{"name": wt.Name}
	if branch != "" {
		ready["branch"] = branch
	}
	s.publishLive("worktree.ready", wt.Directory, ready)
	s.startCommands(wt.Directory, p.ID, "")
	if !s.cfg.Workspaces {
		// OpenCode waits for the workspace's status, which only its sync
		// (off without the flag) would send.
		return workspaceError(w, "WorkspaceCreateError", "Timed out waiting for global event")
	}
	s.startWorkspaceSync(ws)
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) workspaceCreateFailed(w http.ResponseWriter, r *http.Request, err error) error {
	var we *vcs.WorktreeError
	if errors.As(err, &we) {
		return workspaceError(w, "WorkspaceCreateError", strings.TrimSpace(we.Message))
	}
	return s.gitError(r, err)
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if isNull(b) {
		return nil
	}
	return b
}

func (s *Server) now() int64 { return time.Now().UnixMilli() }

// startWorkspaceSync is OpenCode's startSync for a local target: the
// workspace is connected while its directory exists. Each change is
// published as workspace.status on /global/event.
func (s *Server) startWorkspaceSync(ws Workspace) {
	if !s.cfg.Workspaces {
		return
	}
	st := "error"
	if ws.Directory != nil {
		if fi, err := os.Stat(*ws.Directory); err == nil && fi.IsDir() {
			st = "connected"
		}
	}
	if s.workspaces.setStatus(ws.ID, st) {
		s.publishLive("workspace.status", "global", map[string]any{"workspaceID": ws.ID, "status": st})
	}
}

// syncWorkspaceList registers the worktrees the adapter lists that no
// workspace of the project has the name of (OpenCode's syncList).
func (s *Server) syncWorkspaceList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, ident, err := s.projects.reg.Open(ctx, s.directory(r))
	if err != nil {
		return s.gitError(r, err)
	}
	// Named against every workspace of the project (OpenCode, without
	// the flag, compares with its empty list and registers the same
	// worktrees again on every call, out of sight).
	known := map[string]bool{}
	for _, ws := range s.workspaces.of(p.ID) {
		known[ws.Name] = true
	}
	list, err := vcs.LinkedWorktrees(ctx, ident, p.Worktree)
	if err != nil {
		if ctx.Err() != nil {
			return s.gitError(r, err)
		}
		s.log.Warn("workspace adapter list failed", "type", "worktree", "err", err)
	}
	for _, wt := range list {
		if known[wt.Name] {
			continue
		}
		known[wt.Name] = true
		dir := wt.Directory
		ws := Workspace{ID: s.ids.Ascending(workspacePrefix), Type: "worktree", Name: wt.Name, Directory: &dir,
			ProjectID: p.ID, TimeUsed: s.now()}
		if wt.Branch != "" {
			b := wt.Branch
			ws.Branch = &b
		}
		if err := s.workspaces.add(ws); err != nil {
			return err
		}
		s.startWorkspaceSync(ws)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) removeWorkspace(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	if err := identifier.Check(workspacePrefix, id); err != nil {
		return badRequest("Params", "id", `Invalid id: expected an ID starting with "wrk_"`)
	}
	ctx := detach(r.Context())
	// Its sessions go with it (their children with them).
	all, err := s.m.ListSessions(ctx)
	if err != nil {
		return err
	}
	in := map[string]bool{}
	kids := map[string][]string{}
	for _, ss := range all {
		if ss.WorkspaceID == id {
			in[ss.ID] = true
		}
		if ss.ParentID != "" {
			kids[ss.ParentID] = append(kids[ss.ParentID], ss.ID)
		}
	}
	var remove func(string) error
	remove = func(sid string) error {
		for _, k := range kids[sid] {
			if err := remove(k); err != nil {
				return err
			}
		}
		if err := s.m.DeleteSession(ctx, sid); err != nil && !isNotFound(err) {
			return err
		}
		return nil
	}
	for _, ss := range all {
		if in[ss.ID] && !in[ss.ParentID] {
			if err := remove(ss.ID); err != nil {
				return err
			}
		}
	}
	ws, ok := s.workspaces.get(id)
	if !ok {
		writeJSON(w, http.StatusOK, nil)
		return nil
	}
	s.workspaces.remove(id)
	if ws.Directory != nil {
		// As OpenCode, a worktree that cannot be removed is only logged.
		if _, ident, err := s.projects.reg.Open(ctx, s.directory(r)); err != nil {
			s.log.Error("remove workspace worktree", "workspace", id, "err", err)
		} else if err := vcs.RemoveWorktree(ctx, ident, *ws.Directory); err != nil {
			s.log.Error("remove workspace worktree", "workspace", id, "err", err)
		}
		s.projects.reg.Forget(*ws.Directory)
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func isNotFound(err error) bool {
	var oe *opencode.Error
	return errors.As(err, &oe) && oe.Code == opencode.ENotFound
}

// warpSession moves a session into a workspace, or back to the local
// project (id null), optionally with the changes of the workspace it was
// in (OpenCode's sessionWarp for local targets: the session's workspaceID
// changes; a running turn of it in a local workspace is cancelled first).
func (s *Server) warpSession(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ID          json.RawMessage `json:"id"`
		SessionID   *string         `json:"sessionID"`
		CopyChanges *bool           `json:"copyChanges"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	if body.ID == nil {
		return badRequest("Payload", "id", `Missing key at ["id"]`)
	}
	target := ""
	if !isNull(body.ID) {
		if err := json.Unmarshal(body.ID, &target); err != nil {
			return badRequest("Payload", "id", `Expected a string starting with "wrk" or null at ["id"]`)
		}
		if err := checkID(workspacePrefix, target, "id"); err != nil {
			return err
		}
	}
	if body.SessionID == nil {
		return badRequest("Payload", "sessionID", `Missing key at ["sessionID"]`)
	}
	if err := checkID(identifier.Session, *body.SessionID, "sessionID"); err != nil {
		return err
	}
	ctx := detach(r.Context())
	sid := *body.SessionID
	sess, err := s.m.GetSession(ctx, sid)
	if err != nil && (!isNotFound(err) || target == "") {
		return err
	}
	found := err == nil
	var from Workspace
	var inWorkspace bool
	if found && sess.WorkspaceID != "" {
		if from, inWorkspace = s.workspaces.get(sess.WorkspaceID); inWorkspace {
			if err := s.m.Abort(ctx, sid); err != nil && !isNotFound(err) {
				return err
			}
		}
	}
	patch := ""
	if body.CopyChanges != nil && *body.CopyChanges && found && sess.WorkspaceID != "" && inWorkspace && from.Directory != nil {
		if patch, err = s.rawDiff(ctx, *from.Directory); err != nil {
			return s.warpFailed(w, r, err)
		}
	}
	var to Workspace
	toFound := false
	if target != "" {
		to, toFound = s.workspaces.get(target)
	}
	if patch != "" {
		dir := s.directory(r)
		if target != "" {
			dir = ""
			if toFound && to.Directory != nil {
				dir = *to.Directory
			}
		}
		if dir != "" {
			if err := s.applyPatch(ctx, dir, patch); err != nil {
				return s.warpFailed(w, r, err)
			}
		}
	}
	if target != "" && !toFound {
		return &opencode.Error{Code: opencode.ENotFound, Message: "Workspace not found: " + target}
	}
	if !found {
		return opencode.SessionNotFound(sid)
	}
	if _, err := s.m.UpdateSession(ctx, sid, opencode.SessionPatch{WorkspaceID: &target}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rawDiff is GET /vcs/diff/raw's patch of dir.
func (s *Server) rawDiff(ctx context.Context, dir string) (string, error) {
	_, ident, err := s.projects.reg.Open(ctx, dir)
	if err != nil {
		return "", err
	}
	return vcs.TreeOf(ident, dir).Raw(ctx)
}

// applyPatch is POST /vcs/apply in dir.
func (s *Server) applyPatch(ctx context.Context, dir, patch string) error {
	_, ident, err := s.projects.reg.Open(ctx, dir)
	if err != nil {
		return err
	}
	return vcs.TreeOf(ident, dir).Apply(ctx, patch)
}

func (s *Server) warpFailed(w http.ResponseWriter, r *http.Request, err error) error {
	var ae *vcs.ApplyError
	if errors.As(err, &ae) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"name": "VcsApplyError",
			"data": map[string]any{"message": ae.Message, "reason": ae.Reason}})
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return s.gitError(r, err)
	}
	return workspaceError(w, "WorkspaceWarpError", err.Error())
}
