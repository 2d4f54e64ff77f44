package vectors

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/server"
)

// startTinyServer serves our own server over the tiny model on a loopback
// port and returns its base URL.
func startTinyServer(t *testing.T) string {
	t.Helper()
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(0)
	t.Cleanup(be.Close)
	sess, err := engine.NewSession(m, be, engine.Options{Context: 1024})
	require.NoError(t, err)
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	s, err := server.New(server.Config{Session: sess, Tokenizer: tok, Tiny: true, ModelName: "tiny"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, <-served)
	})
	return "http://" + ln.Addr().String()
}

// TestEndpointOwnServer runs the endpoint client against our own server:
// it must return logprobs with the requested top-20 alternatives.
func TestEndpointOwnServer(t *testing.T) {
	cases, err := ReadVecFile(filepath.Join(officialDir, "official.vec"))
	require.NoError(t, err)
	var c VecCase
	for _, vc := range cases {
		if vc.ID == "short_italian_fact" {
			c = vc
		}
	}
	require.NotEmpty(t, c.ID)
	ep := &Endpoint{URL: startTinyServer(t), Model: "deepseek-v4-flash"}
	steps, err := ep.Continue(context.Background(), c, mustPrompt(t, c), 3, 20)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	require.LessOrEqual(t, len(steps), 3)
	t.Logf("%d steps, first %q", len(steps), steps[0].Selected.Bytes)
	for i, st := range steps {
		require.Len(t, st.Top, 20, "step %d", i)
		// Greedy: the selected token is the most probable one.
		require.Equal(t, st.Top[0], st.Selected, "step %d", i)
		for j := 1; j < len(st.Top); j++ {
			require.LessOrEqual(t, st.Top[j].Logprob, st.Top[j-1].Logprob, "step %d", i)
		}
	}
}
