package cpufeat

import (
	"os"
	"testing"
)

// TestLevels checks the level of feature sets of real CPUs and of partial
// ones: a level needs every extension of it and of the levels below.
func TestLevels(t *testing.T) {
	avx2 := Features{AVX: true, AVX2: true, FMA: true, F16C: true}
	with := func(f Features, set func(*Features)) Features { set(&f); return f }
	skx := with(avx2, func(f *Features) { f.AVX512F, f.AVX512BW, f.AVX512VL = true, true, true })
	clx := with(skx, func(f *Features) { f.AVX512VNNI = true })
	zen4 := with(clx, func(f *Features) { f.AVX512VBMI, f.AVX512GFNI, f.AVX512BITALG = true, true, true })
	for _, tc := range []struct {
		name string
		f    Features
		cpu  Level
	}{
		{"none", Features{}, Generic},
		{"avx only", Features{AVX: true, FMA: true}, Generic},
		{"avx2 without f16c", with(avx2, func(f *Features) { f.F16C = false }), Generic},
		{"avx2 without fma", with(avx2, func(f *Features) { f.FMA = false }), Generic},
		{"haswell", avx2, AVX2},
		{"avx512 f without vl (knights landing)", with(avx2, func(f *Features) { f.AVX512F = true }), AVX2},
		{"avx512f off (GODEBUG)", with(zen4, func(f *Features) { f.AVX512F = false }), AVX2},
		{"skylake-x", skx, AVX512},
		{"vnni without bw", with(clx, func(f *Features) { f.AVX512BW = false }), AVX512},
		{"cascade lake", clx, AVX512VNNI},
		{"vbmi without vnni", with(zen4, func(f *Features) { f.AVX512VNNI = false }), AVX512},
		{"zen4 without gfni", with(zen4, func(f *Features) { f.AVX512GFNI = false }), AVX512VNNI},
		{"zen4", zen4, AVX512VBMI},
		{"avx512 without avx2", with(zen4, func(f *Features) { f.AVX2 = false }), Generic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.CPULevel(); got != tc.cpu {
				t.Errorf("CPULevel = %v, want %v", got, tc.cpu)
			}
			if got := tc.f.Level(); got != tc.cpu {
				t.Errorf("Level = %v, want %v", got, tc.cpu)
			}
			pg := tc.f
			pg.PureGo = true
			if got := pg.CPULevel(); got != tc.cpu {
				t.Errorf("pure Go: CPULevel = %v, want %v", got, tc.cpu)
			}
			if got := pg.Level(); got != Generic {
				t.Errorf("pure Go: Level = %v, want go", got)
			}
		})
	}
}

func TestPureGo(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true, "false": true} {
		if got := PureGo(v); got != want {
			t.Errorf("PureGo(%q) = %v, want %v", v, got, want)
		}
	}
	if got, want := Host().PureGo, PureGo(os.Getenv(PureGoEnv)); got != want {
		t.Errorf("Host().PureGo = %v under %s=%q", got, PureGoEnv, os.Getenv(PureGoEnv))
	}
	if Host().PureGo && Host().Level() != Generic {
		t.Errorf("Host().Level() = %v under %s=%q, want go", Host().Level(), PureGoEnv, os.Getenv(PureGoEnv))
	}
}

func TestLevelString(t *testing.T) {
	for l, want := range map[Level]string{Generic: "go", AVX2: "avx2", AVX512: "avx512", AVX512VNNI: "avx512vnni", AVX512VBMI: "avx512vbmi", 99: "unknown"} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", int(l), got, want)
		}
	}
}
