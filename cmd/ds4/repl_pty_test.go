//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ds4-go/ds4/engine/prompt"
)

// TestMain lets the terminal test run this binary as the ds4 command.
func TestMain(m *testing.M) {
	if os.Getenv("DS4_TEST_RUN_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// openPTY opens a pseudo-terminal pair of 100×30 cells.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100}))
	return master, slave
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestREPLTerminal drives ds4 through a pseudo-terminal that is its
// controlling terminal, as a user would: the history of ~/.ds4_history is
// recalled with the up arrow, Ctrl+C clears a half-typed line, pasted
// lines make one message, the thinking streams in grey, Ctrl+C during the answer stops it (a real
// SIGINT from the terminal) and returns to the prompt, and the lines are
// saved to the history.
func TestREPLTerminal(t *testing.T) {
	home := t.TempDir()
	hist := filepath.Join(home, ".ds4_history")
	require.NoError(t, os.WriteFile(hist, []byte("/nothink\n/think\n"), 0o600))
	master, slave := openPTY(t)

	// -n is large: the answer only ends when interrupted.
	cmd := exec.Command(os.Args[0], "-n", "100000", "--temp", "0", "--ctx", "2048", "--nothink")
	cmd.Env = append(os.Environ(), "DS4_TEST_RUN_MAIN=1", "HOME="+home)
	cmd.Dir = t.TempDir()
	cmd.Stdin, cmd.Stdout = slave, slave
	var stderr, screen syncBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	slave.Close()
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	go io.Copy(&screen, master) // ends with EIO when ds4 exits

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\nscreen: %q\nstderr: %s", what, screen.String(), stderr.String())
			}
		}
	}
	prompts := func() int { return strings.Count(screen.String(), "ds4> ") }
	send := func(s string) {
		t.Helper()
		_, err := master.WriteString(s)
		require.NoError(t, err)
	}

	waitFor("the prompt", func() bool { return prompts() == 1 })
	send("\x1b[A\r") // up arrow: the newest history entry, /think
	waitFor("/think", func() bool { return strings.Contains(screen.String(), "Thinking mode: high.") })

	waitFor("the second prompt", func() bool { return prompts() == 2 })
	send("half-typed")
	waitFor("the echo", func() bool { return strings.Contains(screen.String(), "half-typed") })
	send("\x03") // Ctrl+C at the prompt clears the line
	waitFor("a fresh prompt", func() bool { return prompts() == 3 })

	// A bracketed paste of two lines, then Enter: one message.
	send("\x1b[200~pasted one\rpasted two\x1b[201~")
	waitFor("the pasted lines", func() bool { return strings.Contains(screen.String(), "pasted two") })
	send("\r")
	waitFor("the thinking", func() bool {
		s := screen.String()
		i := strings.Index(s, "\x1b[90m") // grey
		return i >= 0 && len(s) > i+20
	})
	send("\x03") // Ctrl+C during the answer: SIGINT from the terminal
	waitFor("the interrupt", func() bool { return strings.Contains(stderr.String(), "ds4: generated") })
	require.Contains(t, stderr.String(), "ds4: interrupted; keeping the partial answer")
	waitFor("the prompt after the answer", func() bool { return prompts() == 4 })
	require.Contains(t, screen.String()[strings.Index(screen.String(), "\x1b[90m"):], "\x1b[0m", "the grey ends with the answer")

	send("/quit\r")
	select {
	case <-done:
		require.NoError(t, waitErr, "stderr: %s", stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("ds4 did not exit\nscreen: %q\nstderr: %s", screen.String(), stderr.String())
	}
	errOut := stderr.String()
	require.NotContains(t, errOut, "half-typed")
	ts := prefills(t, errOut)
	require.Len(t, ts, 1, "one turn: %s", errOut)
	require.Equal(t, 1+bpe(t, prompt.CompletionSystem)+1+bpe(t, "pasted one\npasted two")+2, ts[0].prefill)
	require.Less(t, ts[0].generated, 2048-ts[0].prefill-1, "stopped before the context filled")
	require.Regexp(t, `ds4: prefill: [0-9.]+ t/s, generation: [0-9.]+ t/s\n$`, errOut)

	b, err := os.ReadFile(hist)
	require.NoError(t, err)
	require.Equal(t, "/nothink\n/think\npasted one\rpasted two\n/quit\n", string(b))
}
