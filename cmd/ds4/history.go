package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// historyMax is the number of entries the chat history keeps, as upstream.
const historyMax = 512

// historyPath returns the chat history file: ~/.ds4_history, with $HOME
// (the current directory when $HOME is unset) as upstream's linenoise.
func historyPath() string {
	home := os.Getenv("HOME")
	if home == "" {
		home = "."
	}
	return filepath.Join(home, ".ds4_history")
}

// history is the chat's input history: the last historyMax non-empty
// entries, oldest first, rewritten to its file after every added entry.
// An entry is a line or a pasted multi-line message; as in upstream's
// linenoise, the file holds one entry a line with embedded newlines
// written as CR.
type history struct {
	path    string
	entries []string
	warn    io.Writer // where the first failure to save is reported
	failed  bool
}

// newHistory returns an empty history saved to path.
func newHistory(path string, warn io.Writer) *history {
	return &history{path: path, warn: warn}
}

// load reads the history file; a missing file is an empty history.
func (h *history) load() error {
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	h.entries = h.entries[:0]
	for line := range strings.SplitSeq(string(b), "\n") {
		if line != "" {
			h.entries = append(h.entries, strings.ReplaceAll(line, "\r", "\n"))
		}
	}
	h.trim()
	return nil
}

// Add records an entry, trimmed, unless it is empty or repeats the newest
// entry, and saves the file.
func (h *history) Add(line string) {
	line = strings.TrimSpace(line)
	if line == "" || (len(h.entries) > 0 && h.entries[len(h.entries)-1] == line) {
		return
	}
	h.entries = append(h.entries, line)
	h.trim()
	if err := h.save(); err != nil && !h.failed {
		h.failed = true
		fmt.Fprintf(h.warn, "ds4: %v\n", err)
	}
}

// trim drops the oldest entries beyond historyMax.
func (h *history) trim() {
	if n := len(h.entries) - historyMax; n > 0 {
		h.entries = append(h.entries[:0], h.entries[n:]...)
	}
}

// save writes the entries one per line, readable by the user only; a
// history with no path is not saved.
func (h *history) save() error {
	if h.path == "" {
		return nil
	}
	var b bytes.Buffer
	for _, e := range h.entries {
		b.WriteString(strings.ReplaceAll(e, "\n", "\r"))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(h.path, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// editorHistory is the history as the line editor sees it (term.History):
// the single-line entries, since the editor cannot show a multi-line one.
// It adds nothing itself; the chat adds whole messages to the history.
type editorHistory struct{ h *history }

// Add ignores the editor's lines.
func (editorHistory) Add(string) {}

// Len returns the number of single-line entries.
func (e editorHistory) Len() int {
	n := 0
	for _, s := range e.h.entries {
		if !strings.Contains(s, "\n") {
			n++
		}
	}
	return n
}

// At returns the single-line entry i places back from the newest (0 is
// the newest).
func (e editorHistory) At(i int) string {
	want := i
	for j := len(e.h.entries) - 1; j >= 0; j-- {
		if s := e.h.entries[j]; !strings.Contains(s, "\n") {
			if i == 0 {
				return s
			}
			i--
		}
	}
	panic(fmt.Sprintf("history: no entry %d", want))
}
