package catalog

import (
	"slices"
	"strings"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// Integration is a provider as OpenCode's v2 integration routes list it
// (GET /api/integration): how a key can be given to it (stored: Key; read
// from the environment: Env) and where it has one (Connections).
type Integration struct {
	ID, Name string
	// Key: a key can be stored for it (POST …/connect/key).
	Key bool
	// Env are the variables a key is read from (nil: no env method).
	Env         []string
	Connections []Connection
}

// Connection is one place an integration's key is: a stored credential
// (its auth.json entry: Credential is its ID, Label its name) or an
// environment variable that is set (Env).
type Connection struct {
	Credential, Label string
	Env               string
}

// DefaultLabel names a credential stored without a label, as OpenCode does.
const DefaultLabel = "default"

const credentialPrefix = "cred_"

// CredentialID is the ID the v2 routes give provider id's auth.json entry:
// the one credential an integration has, as OpenCode keeps one per
// integration.
func CredentialID(providerID string) string { return credentialPrefix + providerID }

// CredentialProvider is the provider whose auth.json entry a credential ID
// names.
func CredentialProvider(credentialID string) (string, bool) {
	id, ok := strings.CutPrefix(credentialID, credentialPrefix)
	return id, ok && id != ""
}

// integrations are OpenCode 1.18.33's integrations of in: every models.dev
// provider that reads a key from the environment (a key method and an env
// method), then the config's providers: one whose config sets env gets
// that env method (a provider only the config knows has no key method),
// and a config name renames one. OpenCode's OAuth methods (ChatGPT plans,
// the Console account) and its Console's "opencode" integration are not
// offered: this server runs no login flow. Sorted by name as JavaScript's
// localeCompare sorts.
func integrations(in Inputs, getenv func(string) string) []Integration {
	var out []*Integration
	byID := map[string]*Integration{}
	get := func(id string) *Integration {
		if it, ok := byID[id]; ok {
			return it
		}
		it := &Integration{ID: id, Name: id}
		byID[id] = it
		out = append(out, it)
		return it
	}
	for _, p := range in.Dev.Providers {
		if len(p.Env) == 0 {
			continue
		}
		it := get(p.ID)
		if p.Name != "" {
			it.Name = p.Name
		}
		it.Key, it.Env = true, slices.Clone(p.Env)
	}
	if in.Config != nil {
		for _, id := range sortedKeys(in.Config.Provider) {
			pc := in.Config.Provider[id]
			if _, known := byID[id]; !known && pc.Env == nil {
				continue
			}
			it := get(id)
			if pc.Name != "" {
				it.Name = pc.Name
			}
			if pc.Env != nil {
				it.Env = slices.Clone(pc.Env)
			}
		}
	}
	list := make([]Integration, len(out))
	for i, it := range out {
		if a, ok := in.Auth[it.ID]; ok {
			label := DefaultLabel
			if a.Label != nil {
				label = *a.Label
			}
			it.Connections = append(it.Connections, Connection{Credential: CredentialID(it.ID), Label: label})
		}
		for _, name := range it.Env {
			if getenv(name) != "" {
				it.Connections = append(it.Connections, Connection{Env: name})
			}
		}
		list[i] = *it
	}
	c := collate.New(language.Und)
	slices.SortStableFunc(list, func(a, b Integration) int { return c.CompareString(a.Name, b.Name) })
	return list
}

// Integration finds an integration.
func (c *Catalog) Integration(id string) (*Integration, bool) {
	if c == nil {
		return nil, false
	}
	for i := range c.Integrations {
		if c.Integrations[i].ID == id {
			return &c.Integrations[i], true
		}
	}
	return nil, false
}
