package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness"
)

// TestRooflineTiny runs the roofline subcommand on the tiny model with
// small probes and checks its report and Parquet rows.
func TestRooflineTiny(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"roofline", "--buffer-mb", "8", "--min-time", "10ms", "--trials", "1",
		"--prefill", "4", "--decode", "2", "-t", "2", "--parquet", dir, "--no-progress", "--rounds", "3", "--prefill-rounds", "2"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	for _, want := range []string{"read bandwidth", "int8 dot", "dot kernels", "decode kernel limit", "decode speed of light", "of the speed of light", "of the kernel limit", "of the compute limit",
		"Q8_0 dot (AVX2)", "the avx2 mix limit)", "in 3 rounds of 2 tokens, each between bandwidth probes",
		"in 2 rounds, each between int8 dot probes", "GB/s; mean's 95% CI ", "Gop/s; mean's 95% CI "} {
		require.Contains(t, out.String(), want)
	}
	files, err := filepath.Glob(filepath.Join(dir, harness.RooflineTable, "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[harness.RooflineRecord](files[0])
	require.NoError(t, err)
	require.Len(t, recs, 6+3) // embd, 6 layers, head, total
	tot := recs[len(recs)-1]
	require.Equal(t, "total", tot.Part)
	require.Greater(t, tot.ReadGBsAll, 0.0)
	require.Greater(t, tot.DecodeTPS, 0.0)
	require.InDelta(t, tot.DecodeTPS/tot.DecodeLimitTPS, tot.DecodeFraction, 1e-12)
	require.Equal(t, int64(2), tot.Threads)
	require.Greater(t, tot.KernelLimitTPS, 0.0)
	require.LessOrEqual(t, tot.KernelLimitTPS, tot.DecodeLimitTPS*(1+1e-9), "the kernel limit cannot pass the speed of light")
	require.Positive(t, tot.Q8_0GopsAll)
	require.Positive(t, tot.PrefillMACsQ8_0, "the tiny model's attention is Q8_0")
	require.Less(t, tot.PrefillMACsQ8_0, tot.PrefillMACsInt8)
	require.InDelta(t, tot.PrefillTPS/tot.PrefillLimitMixTPS, tot.PrefillFractionMix, 1e-12)
	require.Equal(t, int64(3), tot.DecodeRounds)
	require.Positive(t, tot.DecodeRoundFractionMin)
	require.True(t, tot.DecodeRoundFractionMin <= tot.DecodeRoundFraction && tot.DecodeRoundFraction <= tot.DecodeRoundFractionMax, "%+v", tot)
	require.Positive(t, tot.DecodeRoundReadGBsMin)
	require.Equal(t, int64(2), tot.PrefillRounds)
	require.Positive(t, tot.PrefillRoundFractionMin)
	require.True(t, tot.PrefillRoundFractionMin <= tot.PrefillRoundFraction && tot.PrefillRoundFraction <= tot.PrefillRoundFractionMax, "%+v", tot)
	require.Positive(t, tot.PrefillRoundFractionMix)
	require.Positive(t, tot.PrefillRoundInt8GopsAllMin)

	files, err = filepath.Glob(filepath.Join(dir, harness.RooflineKernelTable, "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	krecs, err := harness.ReadRows[harness.KernelRecord](files[0])
	require.NoError(t, err)
	require.NotEmpty(t, krecs)
	var floors float64
	for _, k := range krecs {
		require.Contains(t, out.String(), k.Type)
		require.NotEmpty(t, k.Kernels)
		floors += k.FloorMs
	}
	require.InDelta(t, 1e3/floors, tot.KernelLimitTPS, 1e-9*tot.KernelLimitTPS)
	require.NotContains(t, out.String(), "the rest (norms", "the decode breakdown without --ops")
}

// TestRooflineOps checks the decode breakdown --ops adds: its table and its
// Parquet rows, one per kind of product, the output head among them.
func TestRooflineOps(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"roofline", "--buffer-mb", "8", "--min-time", "10ms", "--trials", "1",
		"--prefill", "4", "--decode", "2", "-t", "2", "--parquet", dir, "--no-progress", "--ops"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	for _, want := range []string{"decode step", "output.weight", "blk.N.attn_output_b.weight", "the rest (norms"} {
		require.Contains(t, out.String(), want)
	}
	files, err := filepath.Glob(filepath.Join(dir, harness.RooflineOpsTable, "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[harness.DecodeOpRecord](files[0])
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	var sum float64
	for _, r := range recs {
		require.Greater(t, r.StepMillis, 0.0)
		sum += r.Millis
	}
	require.LessOrEqual(t, sum, recs[0].StepMillis)
	require.True(t, slices.ContainsFunc(recs, func(r harness.DecodeOpRecord) bool { return r.Op == "output.weight" && r.Calls == 1 }))
}

func TestRooflineUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"roofline", "--buffer-mb", "0"}, "--buffer-mb"},
		{[]string{"roofline", "--decode", "0"}, "--decode 0: must be at least 1"},
		{[]string{"roofline", "-m", "/nope.gguf"}, "--model /nope.gguf: no such file"},
		{[]string{"roofline", "--buffer-mb", "0"}, "--buffer-mb 0: must be at least 1"},
		{[]string{"roofline", "extra"}, "unexpected argument"},
		{[]string{"roofline", "--no-speed", "--ops"}, "--ops times the decode steps"},
		{[]string{"roofline", "--no-speed", "--rounds", "2"}, "--rounds decodes"},
		{[]string{"roofline", "--rounds", "-1"}, "--rounds -1: must be at least 0"},
		{[]string{"roofline", "--no-speed", "--prefill-rounds", "2"}, "--prefill-rounds prefills"},
		{[]string{"roofline", "--prefill-rounds", "-1"}, "--prefill-rounds -1: must be at least 0"},
		{[]string{"roofline", "--bogus"}, "unknown flag"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 2, run(context.Background(), tc.args, &out, &errOut), "%v: %s", tc.args, errOut.String())
		require.Contains(t, errOut.String(), tc.want, tc.args)
	}
}

// TestRooflineInMemory runs the roofline on a GGUF read into memory of its
// own (--in-memory) and checks the run says so.
func TestRooflineInMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 1})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"roofline", "-m", path, "--in-memory", "--buffer-mb", "8", "--min-time", "10ms", "--trials", "1",
		"--prefill", "4", "--decode", "2", "-t", "2", "--no-progress"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "in-memory")
	require.Contains(t, out.String(), "of the speed of light")
}

// TestRooflineHugePages runs the roofline on a GGUF file and checks that
// the run records its huge-page fraction (Linux only, where it is known).
func TestRooflineHugePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge-page accounting is read from Linux's /proc/self/smaps")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 1})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"roofline", "-m", path, "--buffer-mb", "8", "--min-time", "10ms", "--trials", "1",
		"--prefill", "4", "--decode", "2", "-t", "2", "--no-progress"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Regexp(t, `kernels=\w+ huge-pages=[01]\.\d{3}\n`, out.String())
}

// TestRooflineStreaming runs the roofline with the experts streamed
// through a cache of 4 slots, fewer than a token uses: the report must
// carry the streaming limit and the timed decode's disk figures, whose
// Parquet row has misses, a busy share of at most 1 and a read rate.
func TestRooflineStreaming(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	_, err := synth.WriteFile(path, synth.Options{Params: layout.Tiny(), Recipe: layout.RecipeQ2, Seed: 1})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"roofline", "-m", path, "--ssd-streaming", "--ssd-streaming-cache-experts", "4", "--disk-mb", "1",
		"--buffer-mb", "8", "--min-time", "10ms", "--trials", "1", "--prefill", "4", "--decode", "3", "-t", "2", "--parquet", dir, "--no-progress"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "of the ssd streaming limit")
	require.Regexp(t, `the decode's expert reads kept the disk busy [01]\.\d{3} of the time, at \d+\.\d{3} GB/s while they ran`, out.String())
	files, err := filepath.Glob(filepath.Join(dir, harness.RooflineTable, "model=DS4-tiny", "date=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	recs, err := harness.ReadRows[harness.RooflineRecord](files[0])
	require.NoError(t, err)
	tot := recs[len(recs)-1]
	require.Positive(t, tot.SSDMissesPerToken)
	require.Positive(t, tot.SSDDecodeFraction)
	require.Positive(t, tot.SSDDiskBusy)
	require.LessOrEqual(t, tot.SSDDiskBusy, 1.0)
	require.Positive(t, tot.SSDDiskReadGBs)
}

// TestMappedHuge checks what the huge-page share counts against: the
// whole file, or with --ssd-streaming only the pinned weights, which are
// all the run reads through the mapping.
func TestMappedHuge(t *testing.T) {
	for _, tc := range []struct {
		huge, size, mapped int64
		want               [2]int64
	}{
		{900, 9500, 0, [2]int64{900, 9500}},
		{900, 9500, 1000, [2]int64{900, 1000}},
		{1200, 9500, 1000, [2]int64{1000, 1000}},
	} {
		huge, of := mappedHuge(tc.huge, tc.size, tc.mapped)
		require.Equal(t, tc.want, [2]int64{huge, of}, "%+v", tc)
	}
}

func TestHugePageNote(t *testing.T) {
	for _, tc := range []struct {
		name       string
		huge, size int64
		inMemory   bool
		note       string
		hint       bool
	}{
		{"none", 0, 100 << 20, false, " huge-pages=0.000", true},
		{"under half", 40 << 20, 100 << 20, false, " huge-pages=0.400", true},
		{"most", 98 << 20, 100 << 20, false, " huge-pages=0.980", false},
		{"in memory: no cache to drop", 0, 100 << 20, true, " huge-pages=0.000", false},
		{"empty", 0, 0, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errOut bytes.Buffer
			require.Equal(t, tc.note, hugePageNoteOf(tc.huge, tc.size, "/m/f.gguf", tc.inMemory, &errOut))
			if tc.hint {
				require.Contains(t, errOut.String(), "dd if=/m/f.gguf iflag=nocache count=0")
			} else {
				require.Empty(t, errOut.String())
			}
		})
	}
}
