package steering

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Two pairs, one layer, embd 3:
//
//	good = [2 0 0], [0 2 0]  → mean [1 1 0]
//	bad  = [0 0 1], [1 0 1]  → mean [0.5 0 1]
var (
	good = [][][]float32{{{2, 0, 0}}, {{0, 2, 0}}}
	bad  = [][][]float32{{{0, 0, 1}}, {{1, 0, 1}}, {{9, 9, 9}}} // third pair dropped
)

func requireVec(t *testing.T, want []float64, got []float32) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], float64(got[i]), 1e-6, "element %d: got %v want %v", i, got, want)
	}
}

func TestBuild(t *testing.T) {
	r5, r6 := math.Sqrt(5), math.Sqrt(6)

	// Mean difference [0.5 1 -1], norm 1.5.
	d, err := Build(good, bad, BuildOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, d.Layers)
	require.Equal(t, 3, d.Embd)
	requireVec(t, []float64{1.0 / 3, 2.0 / 3, -2.0 / 3}, d.V)

	// Orthogonalized against b = [0.5 0 1]: d·b/|b|² = -0.5/1.25 = -0.4, so
	// d + 0.4·b = [8 10 -4]/15 ∝ [4 5 -2], norm 3√5.
	d, err = Build(good, bad, BuildOptions{Orthogonalize: true})
	require.NoError(t, err)
	requireVec(t, []float64{4 / (3 * r5), 5 / (3 * r5), -2 / (3 * r5)}, d.V)

	// Pair-normalized: [2 0 -1]/√5 and [-1 2 -1]/√6, averaged, normalized
	// (the mean's 1/2 cancels).
	a := []float64{2/r5 - 1/r6, 2 / r6, -1/r5 - 1/r6}
	na := math.Sqrt(a[0]*a[0] + a[1]*a[1] + a[2]*a[2])
	d, err = Build(good, bad, BuildOptions{PairNormalize: true})
	require.NoError(t, err)
	requireVec(t, []float64{a[0] / na, a[1] / na, a[2] / na}, d.V)

	// Both: a minus its projection on [0.5 0 1], normalized.
	k := (a[0]*0.5 + a[2]) / 1.25
	o := []float64{a[0] - 0.5*k, a[1], a[2] - k}
	no := math.Sqrt(o[0]*o[0] + o[1]*o[1] + o[2]*o[2])
	d, err = Build(good, bad, BuildOptions{PairNormalize: true, Orthogonalize: true})
	require.NoError(t, err)
	requireVec(t, []float64{o[0] / no, o[1] / no, o[2] / no}, d.V)

	// Identical lists give a zero direction, left unchanged by normalize.
	d, err = Build(good, good, BuildOptions{PairNormalize: true, Orthogonalize: true})
	require.NoError(t, err)
	requireVec(t, []float64{0, 0, 0}, d.V)
}

func TestBuildMultiLayer(t *testing.T) {
	g := [][][]float32{{{1, 0}, {0, 3}}}
	b := [][][]float32{{{0, 0}, {0, 0}}}
	d, err := Build(g, b, BuildOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, d.Layers)
	requireVec(t, []float64{1, 0, 0, 1}, d.V)
	requireVec(t, []float64{0, 1}, d.Layer(1))
}

func TestBuildErrors(t *testing.T) {
	_, err := Build(nil, bad, BuildOptions{})
	require.ErrorContains(t, err, "steering:")
	_, err = Build(good, [][][]float32{{{0, 0}}}, BuildOptions{})
	require.ErrorContains(t, err, "values")
	_, err = Build(good, [][][]float32{{{0, 0, 1}, {0, 0, 1}}}, BuildOptions{})
	require.ErrorContains(t, err, "layers")
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	d := &Direction{Layers: 2, Embd: 3, V: []float32{1, -2, 3.5, float32(math.Pi), 0, -0.25}}
	meta := Meta{Component: "ffn_out", PairNormalize: true, OrthogonalizeControlMean: true, GoodFile: "g.txt", BadFile: "b.txt", Model: "/m.gguf"}
	path := filepath.Join(dir, "direction.json")
	require.NoError(t, Write(path, d, meta))

	f32 := filepath.Join(dir, "direction.f32")
	raw, err := os.ReadFile(f32)
	require.NoError(t, err)
	require.Len(t, raw, 24)
	require.Equal(t, []byte{0, 0, 0x80, 0x3f}, raw[:4]) // 1.0 little-endian

	got, err := Read(f32, 2, 3)
	require.NoError(t, err)
	require.Equal(t, d, got)

	m, err := ReadMeta(f32)
	require.NoError(t, err)
	want := meta
	want.Format, want.Shape, want.Note = Format, [2]int{2, 3}, DefaultNote
	require.Equal(t, want, *m)

	js, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(js), "\n  \"format\": \"ds4-directional-steering-v1\",\n")
	var keys map[string]any
	require.NoError(t, json.Unmarshal(js, &keys))
	for _, k := range []string{"format", "shape", "component", "thinking", "pair_normalize", "orthogonalize_control_mean", "good_file", "bad_file", "model", "note"} {
		require.Contains(t, keys, k)
	}
}

func TestReadRejectsSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.f32")
	require.NoError(t, os.WriteFile(p, make([]byte, 20), 0o644))
	_, err := Read(p, 2, 3)
	require.ErrorContains(t, err, "20 bytes, want 24")
	_, err = Read(p, 0, 3)
	require.Error(t, err)
	_, err = Read(filepath.Join(dir, "missing.f32"), 2, 3)
	require.Error(t, err)
	require.Error(t, Write(p, &Direction{Layers: 2, Embd: 3, V: make([]float32, 5)}, Meta{}))
}

func TestReadPrompts(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.txt")
	require.NoError(t, os.WriteFile(p, []byte("# header\n  first prompt  \n\n\t\r\nsecond\r\n  # indented comment\nthird # not a comment"), 0o644))
	got, err := ReadPrompts(p)
	require.NoError(t, err)
	require.Equal(t, []string{"first prompt", "second", "third # not a comment"}, got)

	require.NoError(t, os.WriteFile(p, []byte("# only\n\n  \n"), 0o644))
	_, err = ReadPrompts(p)
	require.ErrorContains(t, err, "no prompts")
	_, err = ReadPrompts(filepath.Join(dir, "missing"))
	require.Error(t, err)
}

func TestScales(t *testing.T) {
	for _, c := range []struct {
		file             string
		ffn, attn        float64
		ffnSet, attnSet  bool
		wantFFN, wantAtt float32
		err              string
	}{
		{"d.f32", 0, 0, false, false, 1, 0, ""},
		{"d.f32", 0, 0.5, false, true, 0, 0.5, ""},
		{"d.f32", -2, 0, true, false, -2, 0, ""},
		{"", 0, 0, false, false, 0, 0, ""},
		{"", 1, 0, true, false, 0, 0, "needs --dir-steering-file"},
		{"d.f32", 101, 0, true, false, 0, 0, "outside"},
		{"d.f32", 0, -100.5, false, true, 0, 0, "outside"},
		{"d.f32", math.NaN(), 0, true, false, 0, 0, "outside"},
	} {
		f, a, err := Scales(c.file, c.ffn, c.attn, c.ffnSet, c.attnSet)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil || f != c.wantFFN || a != c.wantAtt {
			t.Errorf("%+v: got %v %v %v", c, f, a, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	v := []float64{3, 0, -4}
	normalize(v)
	require.InDeltaSlice(t, []float64{0.6, 0, -0.8}, v, 1e-15)
	z := []float64{0, 0}
	normalize(z)
	require.Equal(t, []float64{0, 0}, z)
}
