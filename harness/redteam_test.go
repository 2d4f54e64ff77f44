package harness

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/server"
	"github.com/ds4-go/ds4/server/servertest"
)

// TestRedTeam replays every case with short counts against an in-process
// tiny server and checks that the table has a row per case with its
// counts, and that the RSS and connection columns are filled.
func TestRedTeam(t *testing.T) {
	url := servertest.StartTiny(t, func(c *server.Config) { c.MaxBodyBytes = 1 << 20 })
	cfg := RedTeamConfig{
		URL: url, PID: os.Getpid(), Count: 3, HeavyCount: 1, Storm: 4, Slow: 2, Concurrency: 2,
		SlowWait: 1500 * time.Millisecond, CaseTimeout: 20 * time.Second, Settle: 10 * time.Millisecond,
		OversizeBytes: 1<<20 + 1, HugeBytes: 64 << 10, ToolItems: 50,
	}
	res, err := RedTeam(context.Background(), cfg)
	require.NoError(t, err)
	require.Len(t, res, len(RedTeamCases))
	byCase := map[string]RedTeamResult{}
	for i, r := range res {
		require.Equal(t, RedTeamCases[i], r.Case)
		byCase[r.Case] = r
		n := 0
		for _, c := range r.Status {
			n += c
		}
		require.Equal(t, r.Requests, n, r.Case)
		require.Positive(t, r.RSSBefore, r.Case)
		require.GreaterOrEqual(t, r.ConnsAfter, 0, r.Case)
	}
	// Outcomes that do not depend on the hardening in progress.
	require.Equal(t, map[string]int{"400": 3}, byCase["malformed-json"].Status)
	require.Equal(t, map[string]int{"200": 3}, byCase["unknown-fields"].Status)
	require.Equal(t, map[string]int{"413": 1}, byCase["oversize-body"].Status)
	require.Equal(t, map[string]int{"sent": 4}, byCase["disconnect-storm"].Status)
	require.Equal(t, map[string]int{"400": 1}, byCase["huge-prompt"].Status)
	require.Equal(t, map[string]int{"400": 3}, byCase["n-choices"].Status)
	require.Equal(t, map[string]int{"200": 3}, byCase["logit-bias"].Status)
	require.Contains(t, byCase["special-tokens"].Note, "input_tokens: specials ")
	require.Positive(t, byCase["unknown-fields"].P99)
	require.Equal(t, 2, byCase["slow-body"].ConnsPeak, "the slow bodies' connections are counted while held")

	var b bytes.Buffer
	require.NoError(t, WriteRedTeamTable(&b, res))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, len(RedTeamCases)+1)
	require.Regexp(t, `^case +reqs +status counts +p99 +RSS MiB before→after +conns before/peak/after +note$`, lines[0])
	require.Regexp(t, `^malformed-json +3 +400×3 +\d[\dµms.]* +\d+\.\d→\d+\.\d +\d+/\d+/\d+`, lines[1])
	t.Logf("\n%s", b.String())
}

// TestRedTeamRefusesRemote checks that only loopback servers are replayed
// against, and that unknown cases are named.
func TestRedTeamRefusesRemote(t *testing.T) {
	for _, c := range []struct {
		cfg  RedTeamConfig
		want string
	}{
		{RedTeamConfig{URL: "http://192.0.2.1:8000"}, "not a loopback address"},
		{RedTeamConfig{URL: "https://127.0.0.1:8000"}, "want http://HOST:PORT"},
		{RedTeamConfig{URL: "http://127.0.0.1"}, "want http://HOST:PORT"},
		{RedTeamConfig{URL: "http://127.0.0.1:1", Cases: []string{"nope"}}, `unknown case "nope"`},
	} {
		_, err := RedTeam(context.Background(), c.cfg)
		require.ErrorContains(t, err, c.want, c.cfg.URL)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 198*time.Millisecond, percentile(ds, 0.99))
	require.Equal(t, 5*time.Millisecond, percentile([]time.Duration{5 * time.Millisecond}, 0.99))
	require.Zero(t, percentile(nil, 0.99))
}
