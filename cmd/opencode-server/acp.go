package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/opencode-server/opencode-server/acp"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
)

// The ACP agent asks the lifecycle core through acp.Core, which does not
// import lifecycle.
var _ acp.Core = (*lifecycle.Manager)(nil)

// runACP is `opencode-server acp`: the same core, speaking the Agent Client
// Protocol on stdin/stdout (only JSON-RPC goes to stdout; logs and the
// listening line go to stderr). With --port the process also serves HTTP,
// so the TUI and an ACP client share live sessions. It ends when the
// client closes stdin, or on SIGINT/SIGTERM, and shuts down as the server
// does (running turns get --shutdown-grace).
func runACP(ctx context.Context, args []string, stderr *os.File) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var ln net.Listener
	if o.portSet {
		if ln, err = net.Listen("tcp", net.JoinHostPort(o.hostname, strconv.Itoa(o.port))); err != nil {
			return err
		}
		defer ln.Close()
	}
	a, st, log, err := start(ctx, o, stderr, ln)
	if err != nil {
		return err
	}
	defer st.Close()
	defer a.Close()
	var srv *http.Server
	if ln != nil {
		srv = httpServer(a, log)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http", "err", err)
			}
		}()
		fmt.Fprintf(stderr, "opencode server listening on http://%s\n", ln.Addr())
	}
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- acp.Serve(sctx, os.Stdin, os.Stdout, acp.Options{Core: a.Manager, Directory: o.directory,
			Version: opencode.Version, Logger: log, Commands: a.Commands, Catalog: a.Catalog})
	}()
	select {
	case err = <-done:
	case <-sctx.Done():
		log.Info("shutting down")
	}
	gctx, gcancel := context.WithTimeout(context.Background(), o.grace)
	a.Manager.Drain(gctx)
	gcancel()
	a.Shutdown()
	if srv != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(cctx)
		cancel()
	}
	return err
}
