package progress

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLogLinesWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "work", 4<<20, "B")
	b.interval = 0 // log every update
	b.Add(1 << 20)
	b.Add(3 << 20)
	b.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], "work  25.0% 1.0MiB/4.0MiB")
	require.Contains(t, lines[2], "work 100.0% 4.0MiB/4.0MiB")
	require.NotContains(t, buf.String(), "\r", "no terminal redraws in a log")

	buf.Reset()
	c := New(&buf, "steps", 10, "")
	c.Add(3) // within the 5 s interval: silent
	c.Finish()
	require.Equal(t, 1, strings.Count(buf.String(), "\n"))
	require.Contains(t, buf.String(), "3/10")
}
