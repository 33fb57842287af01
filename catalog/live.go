package catalog

import "sync/atomic"

// Live is the catalog in use, replaced whole when what it is made from
// changes (a key added through PUT /auth, a fresh models.dev catalog):
// readers get a consistent snapshot and never wait.
type Live struct {
	p atomic.Pointer[Catalog]
}

// NewLive is a Live holding c.
func NewLive(c *Catalog) *Live {
	l := &Live{}
	l.Set(c)
	return l
}

// Get is the current catalog (nil for a nil Live).
func (l *Live) Get() *Catalog {
	if l == nil {
		return nil
	}
	return l.p.Load()
}

// Set replaces the catalog.
func (l *Live) Set(c *Catalog) {
	if c != nil && c.index == nil {
		c.Build()
	}
	l.p.Store(c)
}
