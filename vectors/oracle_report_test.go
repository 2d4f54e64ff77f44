package vectors

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/convert/checkpoint"
)

func TestOracleVerdict(t *testing.T) {
	good := PathResult{Path: "prefill", VsF32Ref: Metrics{Top1: 1}, VsOfficial: Metrics{Top1: 1}}
	bad := PathResult{Path: "decode", VsF32Ref: Metrics{MeanKL: 1, MaxKL: 1, MedianKL: 1, Top1: 0.5}, VsOfficial: Metrics{Top1: 1}}
	for _, tc := range []struct {
		name  string
		mode  checkpoint.Mode
		paths []PathResult
		want  string
		err   string
	}{
		{"lossless within the bars", checkpoint.ModeLossless, []PathResult{good, good}, "ok", ""},
		{"f32 within the bars", checkpoint.ModeF32, []PathResult{good}, "ok", ""},
		{"lossless missing bar A", checkpoint.ModeLossless, []PathResult{good, bad}, "MISSED", "c lossless decode vs f32ref: bar A missed"},
		{"quantized: reported, however far", checkpoint.ModeQ2, []PathResult{bad}, "reported", ""},
		{"quantized and close", checkpoint.ModeQ4, []PathResult{good}, "reported", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &OracleResult{Case: "c", Mode: tc.mode, Paths: tc.paths}
			got, err := r.Verdict()
			require.Equal(t, tc.want, got)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func TestOracleFallbackTensors(t *testing.T) {
	for _, tc := range []struct {
		name string
		conv *checkpoint.Report
		want []string
	}{
		{"no report", nil, nil},
		{"none", &checkpoint.Report{}, nil},
		{"two", &checkpoint.Report{Fallbacks: []checkpoint.Fallback{{Tensor: "blk.0.ffn_down_exps.weight"}, {Tensor: "blk.1.ffn_down_exps.weight"}}},
			[]string{"blk.0.ffn_down_exps.weight", "blk.1.ffn_down_exps.weight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, (&OracleResult{Conv: tc.conv}).FallbackTensors())
		})
	}
}

func TestLoadOracles(t *testing.T) {
	dir := filepath.Join("testdata", "oracle")
	for _, tc := range []struct {
		name  string
		dirs  []string
		names []string
		err   bool
	}{
		{"none", nil, []string{}, false},
		{"two", []string{filepath.Join(dir, "tiny_w16_r16"), filepath.Join(dir, "hd192_w8_r32")}, []string{"tiny_w16_r16", "hd192_w8_r32"}, false},
		{"one does not load", []string{filepath.Join(dir, "tiny_w16_r16"), t.TempDir()}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases, err := LoadOracles(tc.dirs)
			if tc.err {
				require.Error(t, err)
				require.Nil(t, cases)
				return
			}
			require.NoError(t, err)
			names := []string{}
			for _, c := range cases {
				names = append(names, c.Name)
			}
			require.Equal(t, tc.names, names)
		})
	}
}
