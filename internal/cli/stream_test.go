package cli

import (
	"bytes"
	"errors"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/mmap"
)

func TestParseCacheSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want CacheSize
		err  string
	}{
		{"32GB", CacheSize{Bytes: 32e9}, ""},
		{"512MiB", CacheSize{Bytes: 512 << 20}, ""},
		{"1.5GiB", CacheSize{Bytes: 3 << 29}, ""},
		{"1.5gib", CacheSize{Bytes: 3 << 29}, ""},
		{"20 GB", CacheSize{Bytes: 20e9}, ""},
		{"64KB", CacheSize{Bytes: 64000}, ""},
		{"64KiB", CacheSize{Bytes: 65536}, ""},
		{"2TB", CacheSize{Bytes: 2e12}, ""},
		{"1TiB", CacheSize{Bytes: 1 << 40}, ""},
		{"4096B", CacheSize{Bytes: 4096}, ""},
		{"289", CacheSize{Experts: 289}, ""},
		{" 6 ", CacheSize{Experts: 6}, ""},
		{"0", CacheSize{}, "at least 1"},
		{"-3", CacheSize{}, "at least 1"},
		{"1.5", CacheSize{}, "whole count of experts"},
		{"", CacheSize{}, "empty"},
		{"GB", CacheSize{}, "not a number"},
		{"1e3MB", CacheSize{}, "not a number"},
		{"0.5B", CacheSize{}, "at least 1 byte"},
		{"-1GB", CacheSize{}, "at least 1 byte"},
		{"12 parsecs", CacheSize{}, "want bytes with a unit"},
		{"9999999TB", CacheSize{}, "below 4 EiB"},
	} {
		got, err := ParseCacheSize(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		require.Equal(t, c.want, got, "%q", c.in)
	}
}

// TestStreamingCheck checks the flags' own checks: a size needs
// --ssd-streaming and must parse.
func TestStreamingCheck(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{nil, ""},
		{[]string{"--ssd-streaming"}, ""},
		{[]string{"--ssd-streaming", "--ssd-streaming-cache-experts", "2GiB"}, ""},
		{[]string{"--ssd-streaming-cache-experts", "2GiB"}, "--ssd-streaming-cache-experts 2GiB: needs --ssd-streaming"},
		{[]string{"--ssd-streaming", "--ssd-streaming-cache-experts", "lots"}, "--ssd-streaming-cache-experts lots: want bytes"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		s := AddStreaming(fs)
		require.NoError(t, Parse(fs, c.args))
		err := s.Check()
		if c.err == "" {
			require.NoError(t, err, "%q", c.args)
		} else {
			require.ErrorContains(t, err, c.err, "%q", c.args)
		}
	}
}

// TestStartStreaming sets streaming up on a synthetic model file: off
// without the flag, a usage error for the built-in tiny model, the slots a
// size asks for, the minimum a token needs, and the start line.
func TestStartStreaming(t *testing.T) {
	p := layout.Tiny()
	p.Vocab = 1024
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 5})
	require.NoError(t, err)
	// A model streams once: each case opens its own.
	open := func(t *testing.T) *engine.Model {
		m, err := engine.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { m.File.Close() })
		return m
	}
	layers, _, err := open(t).ExpertLayers()
	require.NoError(t, err)
	slot := expertcache.SlotBytes(layers)
	total := p.Layers * p.Experts

	for _, c := range []struct {
		name    string
		args    []string
		path    string
		slots   int
		err     string
		usage   bool
		reserve int64
	}{
		{name: "off", slots: -1},
		{name: "tiny", args: []string{"--ssd-streaming"}, path: "", err: "give one with -m", usage: true},
		{name: "experts", args: []string{"--ssd-streaming", "--ssd-streaming-cache-experts", "7"}, path: path, slots: 7},
		{name: "bytes", args: []string{"--ssd-streaming", "--ssd-streaming-cache-experts", strconv.FormatInt(9*slot+1, 10) + "B"}, path: path, slots: 9},
		{name: "all", args: []string{"--ssd-streaming", "--ssd-streaming-cache-experts", "100000"}, path: path, slots: total},
		{name: "one", args: []string{"--ssd-streaming", "--ssd-streaming-cache-experts", "1"}, path: path, slots: 1},
		{name: "too few", args: []string{"--ssd-streaming", "--ssd-streaming-cache-experts", "1KiB"}, path: path, err: "holds no expert of", usage: true},
		{name: "default", args: []string{"--ssd-streaming"}, path: path, slots: 0},
		{name: "reserve", args: []string{"--ssd-streaming"}, path: path, reserve: 1 << 50, slots: p.ExpertsUsed},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			s := AddStreaming(fs)
			require.NoError(t, Parse(fs, c.args))
			var w bytes.Buffer
			prev := debug.SetMemoryLimit(-1)
			t.Cleanup(func() { debug.SetMemoryLimit(prev) })
			m := open(t)
			st, err := s.StartStreaming(m, c.path, StreamSetup{Context: 256, Reserve: c.reserve}, "prog", &w)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				var ue *UsageError
				require.Equal(t, c.usage, errors.As(err, &ue))
				return
			}
			require.NoError(t, err)
			if c.slots < 0 {
				require.Nil(t, st)
				require.Empty(t, w.String())
				return
			}
			defer st.Stop()
			if c.reserve > 0 {
				require.Contains(t, w.String(), "holds 0 experts; using the minimum")
			}
			if c.slots > 0 {
				require.Equal(t, c.slots, st.Slots)
			} else {
				require.GreaterOrEqual(t, st.Slots, p.ExpertsUsed)
				require.LessOrEqual(t, st.Slots, total)
				require.Positive(t, st.Split.Memory)
				require.Contains(t, w.String(), "% of ")
				require.Equal(t, goMemoryLimit(st.Split.Memory, st.Pin.Bytes, int64(st.Slots)*st.SlotBytes), st.GoLimit)
				require.Equal(t, st.GoLimit, debug.SetMemoryLimit(-1), "the Go runtime's soft limit")
				require.Contains(t, w.String(), "; Go heap limit ")
			}
			require.Contains(t, []string{mmap.Locked, mmap.Populated}, st.Pin.How)
			require.Regexp(t, `(?m)^prog: ssd streaming: resident [0-9.]+ MiB \((mlock|populate)\), expert cache [0-9.]+ MiB = [0-9]+ experts of [0-9.]+ MiB \(O_DIRECT\)`, w.String())
		})
	}
}

func TestStreamSummary(t *testing.T) {
	st := expertcache.Stats{Hits: 90, Misses: 10, BytesRead: 10 << 20, ReadP50: 1500 * time.Microsecond, ReadP99: 4 * time.Millisecond}
	require.Equal(t, "ssd: hit rate 90.0 %, 2.50 MiB read/token, read p50 1.50 ms p99 4.00 ms", StreamSummary(st, 4))
	require.Equal(t, "ssd: hit rate 0.0 %, 0.00 MiB read/token, read p50 0.00 ms p99 0.00 ms", StreamSummary(expertcache.Stats{}, 0))
}

func TestGoMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name               string
		mem, pinned, cache int64
		want               int64
	}{
		{"4 GiB limit", 4000, 1000, 1000, 1400}, // 0.85·4000 − 2000
		{"nothing left", 1000, 500, 400, 0},
		{"no cache", 2000, 0, 0, 1700},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, goMemoryLimit(c.mem, c.pinned, c.cache))
		})
	}
}
