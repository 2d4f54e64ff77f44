package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHistoryAdd(t *testing.T) {
	cases := []struct {
		name  string
		start []string
		add   []string
		want  []string
	}{
		{"trimmed", nil, []string{"  hello  "}, []string{"hello"}},
		{"empty lines skipped", []string{"a"}, []string{"", "   ", "\t"}, []string{"a"}},
		{"repeat of the newest skipped", []string{"a"}, []string{"a", " a", "b", "a"}, []string{"a", "b", "a"}},
		{"oldest dropped past the cap", lines("old", historyMax), []string{"new"}, append(lines("old", historyMax)[1:], "new")},
		{"multi-line entries", []string{"a"}, []string{"  pasted\ntext\n", "b"}, []string{"a", "pasted\ntext", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hist")
			if c.start != nil {
				require.NoError(t, os.WriteFile(path, []byte(strings.Join(c.start, "\n")+"\n"), 0o600))
			}
			h := newHistory(path, nil)
			require.NoError(t, h.load())
			for _, a := range c.add {
				h.Add(a)
			}
			require.Equal(t, c.want, h.entries)
			// Saved after the lines, one per line, and read back the same.
			again := newHistory(path, nil)
			require.NoError(t, again.load())
			require.Equal(t, c.want, again.entries)
		})
	}
}

func lines(prefix string, n int) []string {
	var l []string
	for i := range n {
		l = append(l, fmt.Sprintf("%s %d", prefix, i))
	}
	return l
}

func TestHistoryLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hist")
	// Blank lines and more than historyMax entries.
	raw := "a\n\n" + strings.Join(lines("x", historyMax+5), "\n")
	require.NoError(t, os.WriteFile(path, []byte(raw), 0o600))
	h := newHistory(path, nil)
	require.NoError(t, h.load())
	require.Len(t, h.entries, historyMax)
	require.Equal(t, "x 5", h.entries[0])
	require.Equal(t, fmt.Sprintf("x %d", historyMax+4), h.entries[historyMax-1])

	// CR is an embedded newline, as linenoise writes it.
	require.NoError(t, os.WriteFile(path, []byte("one\rtwo\nthree\n"), 0o600))
	require.NoError(t, h.load())
	require.Equal(t, []string{"one\ntwo", "three"}, h.entries)

	missing := newHistory(filepath.Join(dir, "none"), nil)
	require.NoError(t, missing.load())
	require.Empty(t, missing.entries)

	err := newHistory(dir, nil).load() // a directory
	require.ErrorContains(t, err, "history:")
}

func TestHistorySaveFailure(t *testing.T) {
	var warn strings.Builder
	h := newHistory(filepath.Join(t.TempDir(), "no", "such", "dir"), &warn)
	h.Add("one")
	h.Add("two")
	require.Equal(t, []string{"one", "two"}, h.entries)
	require.Equal(t, 1, strings.Count(warn.String(), "ds4: history:"), "warned once: %s", warn.String())
}

// TestREPLHistoryFile runs a piped chat with $HOME in a temporary
// directory: every non-empty line is appended to ~/.ds4_history, which
// keeps what was there.
func TestREPLHistoryFile(t *testing.T) {
	t.Chdir(t.TempDir())
	home := t.TempDir()
	t.Setenv("HOME", home)
	path := filepath.Join(home, ".ds4_history")
	require.NoError(t, os.WriteFile(path, []byte("earlier\n"), 0o600))
	var out, errOut strings.Builder
	code := runWith(append(append([]string{}, replArgs...), "--nothink"), strings.NewReader("/help\n\n  /help \n\"\"\"\nblock line\n\"\"\"\n/quit\n"), &out, &errOut, defaultHooks())
	require.Equal(t, 0, code, errOut.String())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "earlier\n/help\n\"\"\"\nblock line\n\"\"\"\n/quit\n", string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// An unreadable history is left alone.
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700))
	errOut.Reset()
	code = runWith(replArgs, strings.NewReader("/help\n"), &out, &errOut, defaultHooks())
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, errOut.String(), "not saving the history")
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
}

// TestEditorHistory checks the line editor's view: the single-line
// entries, newest first.
func TestEditorHistory(t *testing.T) {
	h := newHistory("", nil)
	for _, e := range []string{"a", "multi\nline", "b", "c\nd"} {
		h.Add(e)
	}
	e := editorHistory{h}
	require.Equal(t, 2, e.Len())
	require.Equal(t, "b", e.At(0))
	require.Equal(t, "a", e.At(1))
	require.Panics(t, func() { e.At(2) })
	e.Add("ignored")
	require.Len(t, h.entries, 4)
}

// FuzzHistoryFile loads arbitrary history files: no empty entries, at most
// historyMax, and saving then loading again gives the same entries.
func FuzzHistoryFile(f *testing.F) {
	for _, seed := range []string{"", "\n\n", "a\nb\n", "one\rtwo\n", "\r\n\r", "x\x00y\n", strings.Repeat("z\n", historyMax+3)} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "hist")
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		h := newHistory(path, nil)
		require.NoError(t, h.load())
		require.LessOrEqual(t, len(h.entries), historyMax)
		for _, e := range h.entries {
			require.NotEmpty(t, e)
		}
		h.path = filepath.Join(dir, "again")
		require.NoError(t, h.save())
		again := newHistory(h.path, nil)
		require.NoError(t, again.load())
		require.Equal(t, h.entries, again.entries)
	})
}
