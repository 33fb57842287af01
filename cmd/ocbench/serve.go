package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/app"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/sqlite"
)

// serveProfiled runs our server in this process, wired as
// cmd/opencode-server does, plus net/http/pprof on a second loopback
// address, so the load of another ocbench can be profiled:
//
//	ocbench -serve 127.0.0.1:4301 -serve-config stub.json -serve-data DIR -pprof 127.0.0.1:6060
//	go tool pprof -top http://127.0.0.1:6060/debug/pprof/profile?seconds=30
func serveProfiled(addr, pprofAddr, storeKind, data, cfgFile, reply string) error {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var st store.Store
	var err error
	switch storeKind {
	case "sqlite":
		if err := os.MkdirAll(data, 0o755); err != nil {
			return err
		}
		if st, err = sqlite.Open(ctx, filepath.Join(data, "opencode-server.db")); err != nil {
			return err
		}
	case "memory":
		st = memory.New()
	default:
		return fmt.Errorf("-serve-store must be sqlite or memory")
	}
	defer st.Close()
	dir, _ := os.Getwd()
	paths := config.Paths(dir)
	if cfgFile != "" {
		paths = append(paths, cfgFile)
	}
	cfg, err := config.Load(paths...)
	if err != nil {
		return err
	}
	a, err := app.New(ctx, app.Options{Store: st, Directory: dir, Config: cfg, Heartbeat: 10 * time.Second, Logger: log,
		Scripted: scripted.Config{Reply: reply, Chunks: 5}})
	if err != nil {
		return err
	}
	defer a.Close()
	if pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		pl, err := net.Listen("tcp", pprofAddr)
		if err != nil {
			return err
		}
		go func() { _ = http.Serve(pl, mux) }()
		fmt.Fprintf(os.Stderr, "pprof on http://%s/debug/pprof/\n", pl.Addr())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("opencode server listening on http://%s\n", ln.Addr())
	go func() { _ = srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	a.Shutdown()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
