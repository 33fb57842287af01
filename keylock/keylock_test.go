package keylock

import (
	"sync"
	"testing"
)

// TestLocks: one key's holders run one at a time, other keys do not wait
// for them, and a key is forgotten once nobody holds or waits for it.
func TestLocks(t *testing.T) {
	var l Locks
	unlockA := l.Lock("a")
	unlockB := l.Lock("b") // another key: no wait
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, most := 0, 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.Lock("a")()
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			mu.Unlock()
		}()
	}
	unlockB()
	unlockA()
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders of one key at once", most)
	}
	if n := l.Len(); n != 0 {
		t.Errorf("%d keys kept after every unlock", n)
	}
}
