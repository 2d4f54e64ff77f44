package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
)

// unitDirs returns a layers × embd set of random unit rows.
func unitDirs(p layout.Params, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	d := make([]float32, p.Layers*p.Embd)
	for l := range p.Layers {
		row := d[l*p.Embd : (l+1)*p.Embd]
		var n float64
		for j := range row {
			row[j] = float32(r.NormFloat64())
			n += float64(row[j]) * float64(row[j])
		}
		for j := range row {
			row[j] = float32(float64(row[j]) / math.Sqrt(n))
		}
	}
	return d
}

func dot64(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestSteeringZeroScaleIsIdentity checks a steering with both scales zero
// leaves the logits bit-identical.
func TestSteeringZeroScaleIsIdentity(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	toks := testTokens(20, m.Params.Vocab)
	plain, err := NewSession(m, be, Options{Context: 64})
	require.NoError(t, err)
	require.NoError(t, plain.Prefill(toks))
	zero, err := NewSession(m, be, Options{Context: 64, Steering: &Steering{Dir: unitDirs(m.Params, 1)}})
	require.NoError(t, err)
	require.NoError(t, zero.Prefill(toks))
	for j, v := range plain.Logits() {
		require.Equal(t, math.Float32bits(v), math.Float32bits(zero.Logits()[j]), "logit %d", j)
	}
}

// TestSteeringEdit observes the sublayer outputs inside the engine: scale 1
// removes the projection onto v, scale 2 reflects it, at both points.
func TestSteeringEdit(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	be := cpu.New(2)
	defer be.Close()
	p := m.Params
	dir := unitDirs(p, 2)
	for _, tc := range []struct {
		name      string
		ffn, attn float32
	}{{"ffn-remove", 1, 0}, {"attn-remove", 0, 1}, {"ffn-reflect", 2, 0}, {"attn-reflect", 0, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[bool]int{}
			var before []float32
			observe := func(il int, attn, after bool, y []float32) {
				v := dir[il*p.Embd : (il+1)*p.Embd]
				if !after {
					before = append(before[:0], y...)
					return
				}
				seen[attn]++
				s := tc.ffn
				if attn {
					s = tc.attn
				}
				d0, d1 := dot64(v, before), dot64(v, y)
				norm := math.Sqrt(dot64(before, before))
				switch s {
				case 1:
					require.LessOrEqual(t, math.Abs(d1), 1e-5*norm+1e-30, "layer %d: projection left %v (was %v)", il, d1, d0)
				case 2:
					require.InDelta(t, -d0, d1, 1e-5*norm+1e-30, "layer %d: reflection", il)
				}
				// The component orthogonal to v is unchanged.
				for j := range y {
					want := float64(before[j]) - (d0-d1)*float64(v[j])
					require.InDelta(t, want, float64(y[j]), 1e-5*norm+1e-6)
				}
			}
			s, err := NewSession(m, be, Options{Context: 64, Steering: &Steering{Dir: dir, FFN: tc.ffn, Attn: tc.attn}})
			require.NoError(t, err)
			s.observeSteer = observe
			toks := testTokens(5, p.Vocab)
			require.NoError(t, s.Prefill(toks))
			require.NoError(t, s.Decode(7))
			steered := tc.attn != 0
			require.Equal(t, 6*p.Layers, seen[steered])
			require.Zero(t, seen[!steered])
		})
	}
}

// TestSteeringPrefillMatchesDecode checks steering keeps prefill and decode
// bit-identical.
func TestSteeringPrefillMatchesDecode(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, func(p *layout.Params) { p.CompressRatios = []int{0, 0, 4, 16, 4, 128} })
	be := cpu.New(2)
	defer be.Close()
	st := &Steering{Dir: unitDirs(m.Params, 3), FFN: 1.5, Attn: -0.75}
	toks := testTokens(40, m.Params.Vocab)
	v := m.Params.Vocab
	pre, err := NewSession(m, be, Options{Context: 128, Steering: st})
	require.NoError(t, err)
	all := make([]float32, len(toks)*v)
	require.NoError(t, pre.PrefillAll(toks, all))
	plain, err := NewSession(m, be, Options{Context: 128})
	require.NoError(t, err)
	require.NoError(t, plain.Prefill(toks))
	require.NotEqual(t, plain.Logits(), pre.Logits(), "steering had no effect")
	dec, err := NewSession(m, be, Options{Context: 128, Steering: st})
	require.NoError(t, err)
	for i, tok := range toks {
		require.NoError(t, dec.Decode(tok))
		for j, got := range dec.Logits() {
			if want := all[i*v+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("position %d logit %d: decode %v, prefill %v", i, j, got, want)
			}
		}
	}
	allocs := testing.AllocsPerRun(5, func() {
		if err := dec.Decode(5); err != nil {
			t.Fatal(err)
		}
	})
	if !raceEnabled {
		require.Zero(t, allocs)
	}
}

// TestSteeringValidate checks the length and scale checks.
func TestSteeringValidate(t *testing.T) {
	m := tinyModel(t, layout.RecipeQ2, nil)
	p := m.Params
	dir := unitDirs(p, 4)
	require.NoError(t, (&Steering{Dir: dir, FFN: 100, Attn: -100}).Validate(p))
	for name, st := range map[string]*Steering{
		"short":   {Dir: dir[:len(dir)-1], FFN: 1},
		"long":    {Dir: append(append([]float32(nil), dir...), 0), FFN: 1},
		"nan":     {Dir: dir, FFN: float32(math.NaN())},
		"inf":     {Dir: dir, Attn: float32(math.Inf(1))},
		"too big": {Dir: dir, FFN: 100.5},
		"too low": {Dir: dir, Attn: -101},
	} {
		require.Error(t, st.Validate(p), name)
	}
	be := cpu.New(1)
	defer be.Close()
	_, err := NewSession(m, be, Options{Steering: &Steering{Dir: dir[:3], FFN: 1}})
	require.ErrorContains(t, err, "steering")
}
