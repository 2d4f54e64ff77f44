package harness

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/tokenizer"
)

func TestReadBenchPrompt(t *testing.T) {
	tok, err := tokenizer.Default()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "prompt.txt")
	const text = "The quick brown fox jumps over the lazy dog."
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	for _, tc := range []struct {
		name   string
		path   string
		chat   bool
		system string
		mode   string
		want   []int
	}{
		{"raw", path, false, "ignored", "raw", tok.Encode(text)},
		{"chat", path, true, "Be brief.", "chat", EncodeChat(tok, "Be brief.", text)},
		{"missing", filepath.Join(t.TempDir(), "nope.txt"), false, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, ids, err := ReadBenchPrompt(tok, tc.path, tc.chat, tc.system)
			if tc.want == nil {
				require.ErrorIs(t, err, os.ErrNotExist)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, ids)
			require.Equal(t, BenchInput{PromptFile: tc.path, PromptMode: tc.mode, PromptTokens: int64(len(tc.want))}, in)
		})
	}
}

func TestCheckVocab(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []int
		err  string
	}{
		{"none", nil, ""},
		{"inside", []int{0, 5, 9}, ""},
		{"past the end", []int{3, 10, 11}, "prompt token 10 is outside the model's vocabulary (10)"},
		{"negative", []int{-1}, "prompt token -1 is outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckVocab(tc.ids, 10)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct {
	n   int
	buf bytes.Buffer
}

func (w *failWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errors.New("disk full")
	}
	return w.buf.Write(p)
}

// TestCSVWriter checks that rows written one at a time make the CSV
// WriteCSV writes, each in its writer as soon as written, and that a
// failed write is reported.
func TestCSVWriter(t *testing.T) {
	rows := []BenchRow{
		{CtxTokens: 2048, PrefillTokens: 2048, PrefillTPS: 123.456, GenTokens: 128, GenTPS: 9.876, KVCacheBytes: 1 << 20},
		{CtxTokens: 4096, PrefillTokens: 2048, PrefillTPS: 100, GenTokens: 128, GenTPS: 8, KVCacheBytes: 2 << 20},
	}
	var all bytes.Buffer
	require.NoError(t, WriteCSV(&all, rows))
	header := len(CSVHeader) + 1
	for _, tc := range []struct {
		name  string
		limit int // bytes the writer takes
		rows  int // rows written before the failure
		err   string
	}{
		{"all", all.Len(), len(rows), ""},
		{"header fails", header - 1, 0, "write CSV: disk full"},
		{"second row fails", all.Len() - 1, 1, "write CSV: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &failWriter{n: tc.limit}
			cw, err := NewCSVWriter(w)
			if tc.limit < header {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			want := []byte(CSVHeader + "\n")
			for i, r := range rows {
				err := cw.Write(r)
				if i < tc.rows {
					require.NoError(t, err)
					want = AppendCSV(want, r)
					require.Equal(t, string(want), w.buf.String(), "row %d in the writer once written", i)
					continue
				}
				require.EqualError(t, err, tc.err)
				return
			}
			require.Equal(t, all.String(), w.buf.String())
		})
	}
}
