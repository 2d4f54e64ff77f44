package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testMeta(t *testing.T) RunMeta {
	m, err := CollectMeta(MetaOptions{Tool: "ds4-bench", Backend: "cpu", Threads: 2, Args: []string{"ds4-bench", "--ctx-max", "64"},
		Now: time.Date(2026, 5, 21, 10, 11, 12, 123456789, time.UTC)})
	require.NoError(t, err)
	return m
}

func TestCollectMeta(t *testing.T) {
	m := testMeta(t)
	require.Equal(t, "builtin:tiny", m.ModelFile)
	require.Equal(t, "2026-05-21T10:11:12.123456Z", m.StartedAt.Format(time.RFC3339Nano))
	require.True(t, strings.HasPrefix(m.RunID, "20260521T101112Z-"), m.RunID)
	require.NotEmpty(t, m.GoVersion)
	require.Equal(t, "ds4-bench --ctx-max 64", m.CommandLine)

	path := filepath.Join(t.TempDir(), "model.gguf")
	require.NoError(t, os.WriteFile(path, []byte("abc"), 0o644))
	h, err := HashFile(path, HashFull, nil)
	require.NoError(t, err)
	require.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", h)
	h, err = HashFile(path, HashQuick, nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "quick:"))
	h, err = HashFile(path, HashNone, nil)
	require.NoError(t, err)
	require.Empty(t, h)
	_, err = HashFile(path, "md5", nil)
	require.ErrorContains(t, err, "unknown hash mode")
	m, err = CollectMeta(MetaOptions{ModelPath: path, Hash: HashFull})
	require.NoError(t, err)
	require.Equal(t, int64(3), m.ModelBytes)
	require.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", m.ModelSHA256)
}

func TestRunPath(t *testing.T) {
	m := testMeta(t)
	m.ModelName = "DS4 tiny/q2"
	require.Equal(t, filepath.Join("res", "bench", "model=DS4_tiny_q2", "date=2026-05-21", m.RunID+".parquet"),
		RunPath("res", BenchTable, m.Partitions(), m.RunID))
}

func TestParquetRoundTrip(t *testing.T) {
	m := testMeta(t)
	m.ModelName = "DS4-tiny"
	cfg := BenchConfig{CtxStart: 16, CtxMax: 64, StepIncr: 16, StepMul: 1, GenTokens: 4}
	require.NoError(t, cfg.Normalize())
	rows := []BenchRow{
		{CtxTokens: 16, PrefillTokens: 16, PrefillTPS: 100.5, GenTokens: 4, GenTPS: 20.25, KVCacheBytes: 1000, PrefillSeconds: 0.16, GenSeconds: 0.2, Repeats: 1},
		{CtxTokens: 32, PrefillTokens: 16, PrefillTPS: 90, PrefillTPSSD: 1.5, GenTokens: 4, GenTPS: 19, GenTPSSD: 0.5, KVCacheBytes: 2000, Repeats: 1},
	}
	in := BenchInput{PromptFile: "x.txt", PromptMode: "raw", PromptTokens: 64}
	root := t.TempDir()
	path, err := WriteBenchRun(root, m, in, cfg, rows)
	require.NoError(t, err)
	require.Equal(t, RunPath(root, BenchTable, m.Partitions(), m.RunID), path)
	got, err := ReadRows[BenchRecord](path)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, r := range got {
		require.True(t, r.StartedAt.Equal(m.StartedAt))
		r.StartedAt = m.StartedAt
		r.Repeats = 1 // not stored: the repeats column is the config's
		require.Equal(t, BenchRecord{RunMeta: m, BenchInput: in, BenchConfig: BenchConfig{CtxStart: 16, CtxMax: 64, CtxAlloc: 69, StepIncr: 16, StepMul: 1, Repeat: 1}, BenchRow: rows[i]}, r)
	}
	kv, err := ReadMetadata(path)
	require.NoError(t, err)
	var back RunMeta
	require.NoError(t, json.Unmarshal([]byte(kv["ds4.run"]), &back))
	require.Equal(t, m.RunID, back.RunID)
	// No temporary file is left beside it.
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
