package main

import (
	"bytes"
	"encoding/json"
	"testing"

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
