// Package keylock is a mutex per key, for as long as someone holds or
// waits for it: a front door serializes the requests of one thread or
// one idempotency key with it, and forgets the key once none is left.
package keylock

import "sync"

// Locks is a set of mutexes by key; the zero value is ready.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	sync.Mutex
	n int // holders and waiters
}

// Lock locks key's mutex and returns its unlock.
func (l *Locks) Lock(key string) (unlock func()) {
	l.mu.Lock()
	e := l.locks[key]
	if e == nil {
		if l.locks == nil {
			l.locks = map[string]*entry{}
		}
		e = &entry{}
		l.locks[key] = e
	}
	e.n++
	l.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.n--; e.n == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}

// Len is how many keys are held or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
