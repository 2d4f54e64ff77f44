// Package servertest serves the embedded tiny model over loopback for the
// tests of packages that drive a server over HTTP (load generators,
// endpoint clients, red-team replays), as net/http/httptest does for
// handlers.
package servertest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/server"
)

// StartTiny serves a server over one 1,024-token session of the tiny model
// on a loopback port until t ends and returns its base URL; mod, when not
// nil, edits the configuration first. A shutdown that outlasts its bound
// (connections a test left hanging) is not an error.
func StartTiny(t testing.TB, mod func(*server.Config)) string {
	t.Helper()
	m, err := engine.OpenTiny()
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(0)
	t.Cleanup(be.Close)
	sess, err := engine.NewSession(m, be, engine.Options{Context: 1024})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Session: sess, Tiny: true, ModelName: "tiny"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("servertest: shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("servertest: serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
