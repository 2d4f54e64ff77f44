package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunRoofline runs the roofline on the tiny model with small probes,
// without the speed, with it and its rounds, and with the products
// timed, and checks what each run measured, its progress and its rows.
func TestRunRoofline(t *testing.T) {
	m, be, cfg := roundsSetup(t)
	cfg.Trials = 1
	for _, tc := range []struct {
		name string
		opt  RooflineOptions
		bars []string // the progress bars started, in order
	}{
		{"no speed", RooflineOptions{Prefill: 4, Decode: 2, Rounds: 3, PrefillRounds: 2, Ops: true}, nil},
		{"speed and rounds", RooflineOptions{Speed: true, Prefill: 4, Decode: 2, Rounds: 3, PrefillRounds: 2},
			[]string{"prefill+decode 14", "decode rounds 18", "prefill rounds 12"}},
		{"speed and products", RooflineOptions{Speed: true, Prefill: 4, Decode: 2, Ops: true}, []string{"prefill+decode 14"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt
			opt.Probe = cfg
			var steps, bars []string
			ticks := map[string]int{}
			opt.Step = func(s string) { steps = append(steps, s) }
			opt.Bar = func(label string, total int) (func(int), func()) {
				key := fmt.Sprintf("%s %d", label, total)
				bars = append(bars, key)
				return func(n int) { ticks[key] += n }, func() {}
			}
			r, err := RunRoofline(context.Background(), m, be, opt)
			require.NoError(t, err)
			require.Equal(t, tc.bars, bars)
			for key, n := range ticks {
				require.Equal(t, key, fmt.Sprintf("%s %d", key[:strings.LastIndexByte(key, ' ')], n), "a bar's ticks reach its total")
			}
			require.NotEmpty(t, steps)
			require.Positive(t, r.Machine.ReadGBsAll)
			require.Equal(t, "total", r.Parts[len(r.Parts)-1].Part)
			require.NotEmpty(t, r.Rates)
			if !opt.Speed {
				require.Zero(t, r.Speed)
				require.Nil(t, r.DecodeRounds)
				require.Nil(t, r.PrefillRounds)
				require.Nil(t, r.Ops, "the products are timed with the speed only")
				return
			}
			require.Equal(t, int64(opt.Decode), r.Speed.DecodeTokens)
			require.Positive(t, r.Speed.DecodeTPS)
			require.Len(t, r.DecodeRounds, opt.Rounds)
			require.Len(t, r.PrefillRounds, opt.PrefillRounds)
			require.Equal(t, opt.Ops, r.Ops != nil)
			if opt.Ops {
				require.Positive(t, r.OpStep)
			}
		})
	}
}

// TestRooflineRows checks the rows a run's measurements make and the
// Parquet files WriteRooflineRun writes of them.
func TestRooflineRows(t *testing.T) {
	parts := []Traffic{{Part: "embd", Bytes: 10}, {Part: "total", Bytes: 10}}
	rates := []KernelRate{{Type: "q8_0", FloorMs: 1}, {Type: "iq2_xxs", FloorMs: 2}}
	ops := []DecodeOp{{Op: "output.weight", Calls: 1, Millis: 0.5}}
	meta := RunMeta{RunID: "rows", ModelName: "tiny", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, tc := range []struct {
		name  string
		r     Roofline
		files int
	}{
		{"without products", Roofline{Parts: parts, Rates: rates}, 2},
		{"with products", Roofline{Parts: parts, Rates: rates, Ops: ops, OpStep: 2 * time.Millisecond}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Len(t, tc.r.Records(meta), len(parts))
			krecs := tc.r.KernelRecords(meta, "avx2")
			require.Len(t, krecs, len(rates))
			for i, k := range krecs {
				require.Equal(t, rates[i], k.KernelRate)
				require.Equal(t, "avx2", k.Kernels)
				require.Equal(t, "rows", k.RunID)
			}
			orecs := tc.r.OpRecords(meta)
			require.Len(t, orecs, len(tc.r.Ops))
			for _, o := range orecs {
				require.InDelta(t, 2.0, o.StepMillis, 1e-12)
			}
			dir := t.TempDir()
			paths, err := WriteRooflineRun(dir, meta, "avx2", &tc.r)
			require.NoError(t, err)
			require.Len(t, paths, tc.files)
			for i, table := range []string{RooflineTable, RooflineKernelTable, RooflineOpsTable}[:tc.files] {
				require.True(t, strings.HasPrefix(paths[i], filepath.Join(dir, table)+string(filepath.Separator)), "%s in %s", paths[i], table)
			}
			krows, err := ReadRows[KernelRecord](paths[1])
			require.NoError(t, err)
			require.Len(t, krows, len(rates))
		})
	}
}

// TestLockError checks that a lock error is told apart from others and
// keeps its cause.
func TestLockError(t *testing.T) {
	cause := errors.New("mlock: cannot allocate memory")
	for _, tc := range []struct {
		name string
		err  error
		lock bool
	}{
		{"lock", &LockError{cause}, true},
		{"wrapped lock", fmt.Errorf("run: %w", &LockError{cause}), true},
		{"other", cause, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var le *LockError
			require.Equal(t, tc.lock, errors.As(tc.err, &le))
			if tc.lock {
				require.ErrorIs(t, tc.err, cause)
				require.Equal(t, cause.Error(), le.Error())
			}
		})
	}
}
