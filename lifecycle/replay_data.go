package lifecycle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// syncData is a replayed event's data, checked and decoded.
type syncData struct {
	raw     map[string]json.RawMessage
	session opencode.Session // session.created.1
	message opencode.Message // message.updated.1
	part    opencode.Part    // message.part.updated.1
	// messageID and partID name what a removal removes.
	messageID, partID string
}

// A key a type's data must have: its path (dots) and JSON kind; a prefix
// is the ID prefix a string must start with.
type syncKey struct {
	path, kind string
	prefix     identifier.Prefix
}

func keys(spec ...string) []syncKey {
	out := make([]syncKey, len(spec))
	for i, s := range spec {
		path, kind, _ := strings.Cut(s, ":")
		kind, prefix, _ := strings.Cut(kind, ":")
		out[i] = syncKey{path, kind, identifier.Prefix(prefix)}
	}
	return out
}

var (
	stepKeys  = keys("timestamp:number", "assistantMessageID:string:msg")
	inputKeys = keys("timestamp:number", "messageID:string:msg")
	// syncDataKeys are the keys the types this server reads must have
	// (beyond sessionID, which every one has); the data of the others is
	// kept as it came.
	syncDataKeys = map[string][]syncKey{
		"session.created.1":      keys("info:object", "info.id:string:ses"),
		"session.updated.1":      keys("info:object"),
		"session.deleted.1":      keys("info:object"),
		"message.updated.1":      keys("info:object", "info.id:string:msg", "info.sessionID:string", "info.role:string", "info.time:object", "info.time.created:number"),
		"message.removed.1":      keys("messageID:string:msg"),
		"message.part.updated.1": keys("part:object", "part.id:string:prt", "part.sessionID:string", "part.messageID:string:msg", "part.type:string"),
		"message.part.removed.1": keys("messageID:string:msg", "partID:string:prt"),

		"session.next.prompted.1":           append(keys("prompt:object", "prompt.text:string"), inputKeys...),
		"session.next.agent.switched.1":     keys("timestamp:number", "agent:string"),
		"session.next.model.switched.1":     keys("timestamp:number", "model:object", "model.id:string", "model.providerID:string"),
		"session.next.moved.1":              keys("timestamp:number", "location:object", "location.directory:string"),
		"session.next.step.started.1":       append(keys("agent:string", "model:object", "model.id:string", "model.providerID:string"), stepKeys...),
		"session.next.step.ended.2":         append(keys("finish:string", "cost:number", "tokens:object"), stepKeys...),
		"session.next.step.failed.1":        append(keys("error:object"), stepKeys...),
		"session.next.step.failed.2":        append(keys("error:object"), stepKeys...),
		"session.next.text.started.1":       append(keys("textID:string"), stepKeys...),
		"session.next.text.ended.1":         append(keys("textID:string", "text:string"), stepKeys...),
		"session.next.reasoning.started.1":  append(keys("reasoningID:string"), stepKeys...),
		"session.next.reasoning.ended.1":    append(keys("reasoningID:string", "text:string"), stepKeys...),
		"session.next.tool.input.started.1": append(keys("callID:string", "name:string"), stepKeys...),
		"session.next.tool.input.ended.1":   append(keys("callID:string", "text:string"), stepKeys...),
		"session.next.tool.called.1":        append(keys("callID:string", "tool:string"), stepKeys...),
		"session.next.tool.success.1":       append(keys("callID:string"), stepKeys...),
		"session.next.tool.failed.1":        append(keys("callID:string", "error:object"), stepKeys...),
		"session.inbox.delivered.1":         inputKeys,
	}
)

// decodeSyncData checks event i's type and data as OpenCode does (its type
// known, its data of its schema, its sessionID the event's aggregate) and
// decodes what this server reads.
func decodeSyncData(i int, e opencode.SyncEvent) (syncData, error) {
	var d syncData
	if !syncTypes[e.Type] {
		return d, replayInvalid("Unknown durable event type "+e.Type, "events", i, "type")
	}
	at := func(path string) []any {
		out := []any{"events", i, "data"}
		for _, k := range strings.Split(path, ".") {
			out = append(out, k)
		}
		return out
	}
	if err := json.Unmarshal(e.Data, &d.raw); err != nil || d.raw == nil {
		return d, replayInvalid("Expected object, got "+opencode.Shown(e.Data), "events", i, "data")
	}
	for _, k := range append(keys("sessionID:string"), syncDataKeys[e.Type]...) {
		v, ok := lookup(d.raw, k.path)
		if !ok {
			return d, replayInvalid("Missing key", at(k.path)...)
		}
		if got := jsonKind(v); got != k.kind {
			return d, replayInvalid("Expected "+k.kind+", got "+opencode.Shown(v), at(k.path)...)
		}
		if k.prefix != "" {
			var s string
			_ = json.Unmarshal(v, &s)
			if identifier.Check(k.prefix, s) != nil {
				return d, replayInvalid(fmt.Sprintf("Expected a string starting with %q, got %s", string(k.prefix)+"_", strconv.Quote(s)), at(k.path)...)
			}
		}
	}
	// The aggregate is the session each event names, and a message or
	// part must be one of it (the store keys them by session).
	var sid string
	_ = json.Unmarshal(d.raw["sessionID"], &sid)
	if sid != e.AggregateID {
		return d, replayInvalid(fmt.Sprintf("Aggregate mismatch: expected %s, got %s", e.AggregateID, sid))
	}
	owned := func(path string) error {
		v, _ := lookup(d.raw, path)
		var s string
		_ = json.Unmarshal(v, &s)
		if s != sid {
			return replayInvalid(fmt.Sprintf("Expected %s, got %s", strconv.Quote(sid), strconv.Quote(s)), at(path)...)
		}
		return nil
	}
	switch e.Type {
	case "session.created.1":
		if err := owned("info.id"); err != nil {
			return d, err
		}
		if err := json.Unmarshal(d.raw["info"], &d.session); err != nil {
			return d, replayInvalid("Invalid session info: "+err.Error(), at("info")...)
		}
	case "message.updated.1":
		if err := owned("info.sessionID"); err != nil {
			return d, err
		}
		if err := json.Unmarshal(d.raw["info"], &d.message); err != nil {
			return d, replayInvalid("Invalid message info: "+err.Error(), at("info")...)
		}
		if d.message.Role != opencode.User && d.message.Role != opencode.Assistant {
			return d, replayInvalid(`Expected "user" | "assistant", got `+strconv.Quote(string(d.message.Role)), at("info.role")...)
		}
	case "message.part.updated.1":
		if err := owned("part.sessionID"); err != nil {
			return d, err
		}
		if err := json.Unmarshal(d.raw["part"], &d.part); err != nil {
			return d, replayInvalid("Invalid part: "+err.Error(), at("part")...)
		}
	case "message.removed.1", "message.part.removed.1":
		_ = json.Unmarshal(d.raw["messageID"], &d.messageID)
		_ = json.Unmarshal(d.raw["partID"], &d.partID)
	}
	return d, nil
}

// lookup finds a dotted path in a JSON object.
func lookup(obj map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	head, rest, nested := strings.Cut(path, ".")
	v, ok := obj[head]
	if !ok || !nested {
		return v, ok
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(v, &inner) != nil {
		return nil, false
	}
	return lookup(inner, rest)
}

// jsonKind is the schema kind of a JSON value: object, array, string,
// number, boolean or null.
func jsonKind(v json.RawMessage) string {
	s := strings.TrimSpace(string(v))
	if s == "" {
		return ""
	}
	switch s[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
