package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4-go/ds4/internal/cli/clitest"
	"github.com/stretchr/testify/require"
)

func TestFlashFigures(t *testing.T) {
	f := flashFigures()
	require.Equal(t, 13764.0, f.UpstreamPerToken)
	require.Equal(t, 6884.0, f.GoPerToken)
	require.Less(t, f.GoFixedAvg, f.UpstreamFixed)
}

// TestRun runs a miniature benchmark end to end.
func TestRun(t *testing.T) {
	var out, errw bytes.Buffer
	code := run([]string{"--prefix", "24", "--turns", "2", "--tool-tokens", "8", "--reply-tokens", "4", "--json", "--dir", t.TempDir()}, &out, &errw)
	require.Zero(t, code, errw.String())
	var rep Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.True(t, rep.Restore.BitIdentical)
	require.Len(t, rep.Turns, 2)
	require.Less(t, rep.Totals.GoDelta, rep.Totals.Upstream)
	require.Less(t, rep.Totals.FlashGoDelta, rep.Totals.FlashUpstream)

	out.Reset()
	require.Zero(t, run([]string{"--prefix", "0", "--turns", "0"}, &out, &errw))
	require.Contains(t, out.String(), "upstream v1 13764 B/token, ds4-go 6884 B/token")
	require.Equal(t, 2, run([]string{"--bogus"}, &out, &errw))
}

// TestUsage checks that bad command lines fail with status 2 and a
// message naming the flag and its value, before the tiny model is built.
func TestUsage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefix", "-5"}, "--prefix -5: must be at least 0"},
		{[]string{"--prefix", "70000"}, "--prefix 70000: must be at most 65280"},
		{[]string{"--turns", "-1"}, "--turns -1: must be at least 0"},
		{[]string{"--turns", "1000"}, "--turns 1000: with --tool-tokens 120 and --reply-tokens 40: the conversation would not fit"},
		{[]string{"--turns", "9223372036854775807"}, "the conversation would not fit"},
		{[]string{"--tool-tokens", "0"}, "--tool-tokens 0: must be at least 1"},
		{[]string{"--reply-tokens", "-3"}, "--reply-tokens -3: must be at least 1"},
		{[]string{"--threads", "-1"}, "--threads -1: must be at least 0"},
		{[]string{"--dir", file}, "--dir " + file + ": is a file, not a directory"},
	} {
		var out, errw bytes.Buffer
		require.Equal(t, 2, run(c.args, &out, &errw), "%q: %s", c.args, errw.String())
		require.Contains(t, errw.String(), c.want, "%q", c.args)
		require.NotContains(t, errw.String(), "building the tiny model", "%q", c.args)
		require.Empty(t, out.String(), "%q", c.args)
	}
	// Single-dash long flags, as upstream's tools spell them.
	var out, errw bytes.Buffer
	require.Zero(t, run([]string{"-prefix", "0", "-turns", "0", "-json"}, &out, &errw), errw.String())
	require.Contains(t, out.String(), `"upstream_bytes_per_token": 13764`)
}

// TestHelpConvention checks --help, -h and bad flags of ds4-kvbench
// against the convention of package cli.
func TestHelpConvention(t *testing.T) {
	clitest.Check(t, command, run)
}
