package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// ErrInjected is the error a Failing store's armed commit returns.
var ErrInjected = errors.New("storetest: injected commit failure")

// Failing wraps a store and fails chosen commits, for tests of what the
// server does when a write does not make it to disk.
type Failing struct {
	store.Store
	mu     sync.Mutex
	match  func(sessionID string, b *store.Batch) bool
	lost   bool
	hits   int
	down   bool
	silent bool
	// reads is how many more history reads fail (FailReads).
	reads int
	// inputsDown: every input read fails (SetInputsDown).
	inputsDown bool
}

// SetInputsDown makes every read of admitted inputs (GetInput,
// InputStatus) fail with ErrReadTimeout until SetInputsDown(false): an
// outage that the reads an admission makes meet, while the session's
// own reads still work.
func (f *Failing) SetInputsDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputsDown = down
}

func (f *Failing) inputsFail() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputsDown
}

// GetInput implements store.Store.
func (f *Failing) GetInput(ctx context.Context, id string) (*opencode.Input, error) {
	if f.inputsFail() {
		return nil, ErrReadTimeout
	}
	return f.Store.GetInput(ctx, id)
}

// InputStatus implements store.Store.
func (f *Failing) InputStatus(ctx context.Context, id string) (store.InputStatus, error) {
	if f.inputsFail() {
		return store.InputStatus{}, ErrReadTimeout
	}
	return f.Store.InputStatus(ctx, id)
}

// ErrReadTimeout is what a history read FailReads armed returns: the
// store did not answer in time.
var ErrReadTimeout = fmt.Errorf("storetest: the history read timed out: %w", context.DeadlineExceeded)

// FailReads makes the next n history reads (ListMessages, MessagesPage)
// fail with ErrReadTimeout, as a database that is slow just after a start.
func (f *Failing) FailReads(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = n
}

// readFails takes one of the history reads FailReads armed, if any.
func (f *Failing) readFails() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads > 0 {
		f.reads--
		return true
	}
	return false
}

// ListMessages implements store.Store.
func (f *Failing) ListMessages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error) {
	if f.readFails() {
		return nil, ErrReadTimeout
	}
	return f.Store.ListMessages(ctx, sessionID)
}

// MessagesPage implements store.Store.
func (f *Failing) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	if f.readFails() {
		return nil, ErrReadTimeout
	}
	return f.Store.MessagesPage(ctx, sessionID, q)
}

// SetSilent makes every commit wait for its context to end, as a
// database behind a partition that never answers (then it fails).
func (f *Failing) SetSilent(silent bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.silent = silent
}

// SetDown makes every commit fail (an outage: a full disk, a database
// that is down) until SetDown(false).
func (f *Failing) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// FailNext arms the store: the next commit for which match returns true
// fails with ErrInjected and writes nothing; later ones succeed.
func (f *Failing) FailNext(match func(sessionID string, b *store.Batch) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.match = match
}

// LoseNext arms the store as FailNext does, except that the commit is
// written and only its answer is lost (a connection that broke after the
// database committed): it returns ErrAnswerLost.
func (f *Failing) LoseNext(match func(sessionID string, b *store.Batch) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.match, f.lost = match, true
}

// ErrAnswerLost is what a commit LoseNext armed returns: the store cannot
// be reached (a deadline), though the write was made.
var ErrAnswerLost = fmt.Errorf("storetest: the commit's answer was lost: %w", context.DeadlineExceeded)

// Failed is how many commits were failed.
func (f *Failing) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// Commit implements store.Store.
func (f *Failing) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	f.mu.Lock()
	if f.silent {
		f.hits++
		f.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	if f.down {
		f.hits++
		f.mu.Unlock()
		return ErrInjected
	}
	if f.match != nil && f.match(sessionID, b) {
		f.match = nil
		f.hits++
		lost := f.lost
		f.lost = false
		f.mu.Unlock()
		if lost {
			if err := f.Store.Commit(ctx, sessionID, b); err != nil {
				return err
			}
			return ErrAnswerLost
		}
		return ErrInjected
	}
	f.mu.Unlock()
	return f.Store.Commit(ctx, sessionID, b)
}
