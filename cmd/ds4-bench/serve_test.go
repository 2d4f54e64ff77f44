package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/server/servertest"
)

// TestServeTiny loads our own server on the tiny model with one and two
// clients and checks the table, the Parquet run and the chart it writes.
func TestServeTiny(t *testing.T) {
	url := servertest.StartTiny(t, nil)
	dir := t.TempDir()
	svg := filepath.Join(dir, "load.svg")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--endpoint", url, "--clients", "1,2", "--requests", "2", "--max-tokens", "4",
		"--prompt-file", excerpt, "--prompt-tokens", "32", "--fresh-prompts", "--parquet", dir, "--svg", svg}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Regexp(t, `(?m)^ *clients +requests +errors +tokens +wall_s +tok/s +x +prompt_tok/s +req/s +ttft_p50 +ttft_p99 +itl_p50 +itl_p99 *$`, out.String())
	require.Regexp(t, `(?m)^ *1 +2 +0 +\d+ +\d+\.\d\d +\d+\.\d\d +1\.00 `, out.String())
	require.Regexp(t, `(?m)^ *2 +4 +0 +\d+ `, out.String())
	require.Regexp(t, `(?m)^ds4-bench serve: 6/6 clients 2, client [01], request 1: [1-4] tokens, ttft \d+\.\d ms, tpot \d+\.\d ms$`, errOut.String())
	levels, err := filepath.Glob(filepath.Join(dir, "load", "model=*", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, levels, 1)
	lr, err := harness.ReadRows[harness.LoadLevelRecord](levels[0])
	require.NoError(t, err)
	require.Len(t, lr, 2)
	require.Equal(t, "ds4-bench serve", lr[0].Tool)
	require.Equal(t, url, lr[0].ModelFile)
	require.NotEmpty(t, lr[0].ModelID)
	require.True(t, lr[0].FreshPrompts)
	require.EqualValues(t, 32, lr[0].PromptTargetTokens)
	reqs, err := filepath.Glob(filepath.Join(dir, "load_requests", "model=*", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	rr, err := harness.ReadRows[harness.LoadRequestRecord](reqs[0])
	require.NoError(t, err)
	require.Len(t, rr, 6)
	for _, r := range rr {
		require.Empty(t, r.Error)
		require.Positive(t, r.PromptTokens)
	}
	raw, err := os.ReadFile(svg)
	require.NoError(t, err)
	require.Contains(t, string(raw), "aggregate tokens/s")
	require.Contains(t, string(raw), " at "+url)
}

// TestServeUsage checks the serve subcommand's command-line errors, and
// that a server that is not there makes failed requests, not a failed run.
func TestServeUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"serve", "--endpoint", "localhost:8000"}, 2, "--endpoint localhost:8000: want http://HOST[:PORT][/v1]"},
		{[]string{"serve", "--clients", "1,0"}, 2, "--clients [1,0]: each must be at least 1"},
		{[]string{"serve", "--clients", "x"}, 2, "invalid argument"},
		{[]string{"serve", "--requests", "0"}, 2, "--requests 0: must be at least 1"},
		{[]string{"serve", "--max-tokens", "0"}, 2, "--max-tokens 0: must be at least 1"},
		{[]string{"serve", "--prompt-tokens", "-1"}, 2, "--prompt-tokens -1: must be at least 0"},
		{[]string{"serve", "--timeout", "-1s"}, 2, "--timeout -1s: must be at least 0"},
		{[]string{"serve", "--svg", "x.pdf"}, 2, "--svg x.pdf: must end in .svg or .png"},
		{[]string{"serve", "--svg", filepath.Join(dir, "no", "x.svg")}, 2, "--svg"},
		{[]string{"serve", "--prompt-file", "/nope.txt"}, 2, "--prompt-file /nope.txt: no such file"},
		{[]string{"serve", "--prompt-file", os.DevNull}, 2, "load prompt text is empty"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), tc.want, tc.args)
		require.True(t, strings.HasPrefix(errOut.String(), "ds4-bench serve: "), errOut.String())
	}

	// Nothing listens on a closed port: every request fails and is counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--endpoint", "http://" + addr, "--clients", "2", "--requests", "1"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "requests name no model")
	require.Regexp(t, `(?m)^ds4-bench serve: 2/2 clients 2, client [01], request 0: 0 tokens, ttft 0\.0 ms, tpot 0\.0 ms, error: .*connection refused$`, errOut.String())
	require.Regexp(t, `(?m)^ *2 +2 +2 +0 `, out.String())
}
