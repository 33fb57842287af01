package routes

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/mcp"
	"github.com/opencode-server/opencode-server/opencode"
)

// MCPServers is what the mcp routes ask of the MCP servers (*mcp.Servers).
type MCPServers interface {
	Status() map[string]mcp.Status
	Connect(ctx context.Context, name string) error
	Disconnect(name string) error
	Add(ctx context.Context, name string, c config.MCPConfig)
	Resources(ctx context.Context) map[string]mcp.Resource
}

var errNoMCP = &opencode.Error{Code: opencode.ENotFound, Message: "MCP server not found", Resource: "mcp"}

// mcpToggle is POST /mcp/{name}/connect and …/disconnect: true once done;
// a connect that fails is reported by GET /mcp, as OpenCode reports it.
func (s *Server) mcpToggle(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.MCP == nil {
		return errNoMCP
	}
	name := chi.URLParam(r, "name")
	var err error
	if strings.HasSuffix(r.URL.Path, "/disconnect") {
		err = s.cfg.MCP.Disconnect(name)
	} else {
		err = s.cfg.MCP.Connect(detach(r.Context()), name)
	}
	if errors.Is(err, mcp.ErrUnknown) {
		return &opencode.Error{Code: opencode.ENotFound, Message: "MCP server not found: " + name, Resource: "mcp"}
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

type mcpAddBody struct {
	Name   *string           `json:"name"`
	Config *config.MCPConfig `json:"config"`
}

// mcpAdd is POST /mcp {name, config}: the server joins this run and is
// connected; the answer is every server's state.
func (s *Server) mcpAdd(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.MCP == nil {
		return errNoMCP
	}
	var b mcpAddBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if b.Name == nil || *b.Name == "" {
		return badRequest("Payload", "name", "Missing key at [\"name\"]")
	}
	if b.Config == nil {
		return badRequest("Payload", "config", "Missing key at [\"config\"]")
	}
	switch b.Config.Type {
	case "local":
		if len(b.Config.Command) == 0 {
			return badRequest("Payload", "config.command", "a local server needs a command")
		}
	case "remote":
		if b.Config.URL == "" {
			return badRequest("Payload", "config.url", "a remote server needs a url")
		}
	default:
		return badRequest("Payload", "config.type", "Expected one of local, remote at [\"config.type\"]")
	}
	s.cfg.MCP.Add(detach(r.Context()), *b.Name, *b.Config)
	writeJSON(w, http.StatusOK, s.cfg.MCP.Status())
	return nil
}
