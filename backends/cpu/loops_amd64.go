//go:build amd64 && !purego

package cpu

import "github.com/ds4-go/ds4/internal/cpufeat"

// loopsFor returns the loops of level l: the AVX-512 forms of
// vec_amd64.s, exp_amd64.s and scatter_amd64.s from cpufeat.AVX512 (F and
// VL), the AVX2/FMA ones from cpufeat.AVX2, else the Go loops. The
// elementwise mixes have only an AVX2 form.
func loopsFor(l cpufeat.Level) loops {
	switch {
	case l >= cpufeat.AVX512:
		return loops{vec: avx512VecOps(), exp: expAVX512, elem: formAVX2, scatter: formAVX512}
	case l >= cpufeat.AVX2:
		return loops{vec: avx2VecOps(), exp: expAVX2, elem: formAVX2, scatter: formAVX2}
	}
	return goLoops()
}
