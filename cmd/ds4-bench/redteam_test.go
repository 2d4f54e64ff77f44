package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedteam runs the subcommand against a loopback HTTP server that
// is healthy but refuses every request, and checks its command-line errors.
func TestRedteam(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"redteam", "--url", srv.URL, "--case", "n-choices,malformed-json", "--count", "2"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Regexp(t, `(?m)^case +reqs +status counts`, out.String())
	require.Regexp(t, `(?m)^n-choices +2 +400×2 `, out.String())
	require.Regexp(t, `(?m)^malformed-json +2 +400×2 `, out.String())

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"redteam", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"redteam", "--count", "x"}, 2, "invalid argument"},
		{[]string{"redteam", "--url", "http://192.0.2.1:8000"}, 1, "not a loopback address"},
		{[]string{"redteam", "--url", srv.URL, "--case", "nope"}, 1, `unknown case "nope"`},
	} {
		errOut.Reset()
		require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), tc.want, tc.args)
	}
}
