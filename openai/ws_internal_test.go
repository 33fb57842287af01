package openai

import (
	"strconv"
	"testing"
)

// TestSocketForgetsEndedResponses: a socket's record of the responses it
// streamed stays bounded: past maxChains, the ended ones are forgotten and
// the running ones kept (a steer still finds them).
func TestSocketForgetsEndedResponses(t *testing.T) {
	c := &socket{chains: map[string]*chain{}}
	running := &chain{done: make(chan struct{})}
	if !c.claim("msg_running", running) {
		t.Fatal("the first claim was refused")
	}
	for i := range 3 * maxChains {
		ended := &chain{done: make(chan struct{})}
		close(ended.done)
		if !c.claim("msg_"+strconv.Itoa(i), ended) {
			t.Fatalf("claim %d refused", i)
		}
	}
	if n := len(c.chains); n > maxChains {
		t.Errorf("the socket remembers %d responses, want at most %d", n, maxChains)
	}
	if c.chainOf("msg_running") != running {
		t.Error("the running response was forgotten")
	}
	if c.claim("msg_running", running) {
		t.Error("a running response was claimed twice")
	}
}
