// Command stub is the model record.py's opencode serve used:
// stubmodel.Directives, two chunks a reply, and a prompt with "slow:"
// streams its reply in 40 chunks 250 ms apart (ten seconds).
//
//	go run ./testdata/reference/edits/stub 127.0.0.1:18931
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

func script(req stubmodel.Request) stubmodel.Response {
	r := stubmodel.Directives(req)
	if strings.Contains(req.LastUserText(), "slow:") && !req.IsTitle() {
		r.Chunks, r.Delay = 40, 250*time.Millisecond
	}
	return r
}

func main() {
	s := stubmodel.New(script, stubmodel.WithChunks(2))
	u, err := s.Start(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(u)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
