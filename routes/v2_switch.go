package routes

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/opencode-server/opencode-server/opencode"
)

// v2SwitchAgent is POST /api/session/{id}/agent: the agent of the next
// turns, answered 204 as OpenCode does.
func (s *Server) v2SwitchAgent(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b struct {
		Agent string `json:"agent" validate:"required"`
	}
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	if !s.knownAgent(b.Agent) {
		return badRequest("Payload", "agent", "Agent not found: \""+b.Agent+"\"")
	}
	if err := s.m.SwitchAgent(detach(r.Context()), id, s.ids.NewMessage(), b.Agent); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// v2SwitchModel is POST /api/session/{id}/model.
func (s *Server) v2SwitchModel(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b struct {
		Model *opencode.ModelRef `json:"model" validate:"required"`
	}
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if b.Model == nil {
		return missingKey("Payload", "model")
	}
	if !s.m.HasModel(b.Model.ProviderID, b.Model.ID) {
		return badRequest("Payload", "model", "Model not found: "+b.Model.ProviderID+"/"+b.Model.ID)
	}
	if err := s.m.SwitchModel(detach(r.Context()), id, s.ids.NewMessage(), *b.Model); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// v2Context is GET /api/session/{id}/context: the session's whole timeline
// in v2 shapes, oldest first: its messages and its agent and model
// switches, ordered by their (time-ascending) IDs.
func (s *Server) v2Context(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	msgs, err := s.m.Messages(r.Context(), id)
	if err != nil {
		return err
	}
	evs, err := s.m.Events(r.Context(), id, 0, 0)
	if err != nil {
		return err
	}
	type entry struct {
		id string
		v  map[string]any
	}
	out := make([]entry, 0, len(msgs))
	for _, mp := range msgs {
		out = append(out, entry{mp.Info.ID, messageV2(mp)})
	}
	for _, e := range evs {
		if e.Type != opencode.EvAgentSwitched && e.Type != opencode.EvModelSwitched {
			continue
		}
		var d struct {
			Timestamp int64           `json:"timestamp"`
			MessageID string          `json:"messageID"`
			Agent     string          `json:"agent"`
			Model     json.RawMessage `json:"model"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		v := map[string]any{"id": d.MessageID, "time": map[string]any{"created": d.Timestamp}}
		if e.Type == opencode.EvAgentSwitched {
			v["type"], v["agent"] = "agent-switched", d.Agent
		} else {
			v["type"], v["model"] = "model-switched", d.Model
		}
		out = append(out, entry{d.MessageID, v})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].id < out[j].id })
	data := make([]map[string]any, len(out))
	for i, e := range out {
		data[i] = e.v
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
	return nil
}
