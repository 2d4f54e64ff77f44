//go:build amd64 && !purego

package cpu

import "github.com/ds4-go/ds4/internal/cpufeat"

// expForms returns expfs and the SwiGLU as each vector form this CPU can
// run does them (AVX-512 and AVX2 on an AVX-512 CPU), so that every form
// is held to the scalar code, not only the one expfs picks; where it has
// none, the scalar loops.
func expForms() []expForm {
	var fs []expForm
	for _, l := range []cpufeat.Level{cpufeat.AVX512, cpufeat.AVX2, cpufeat.Generic} {
		if l > cpuLevel() || (l == cpufeat.Generic && len(fs) > 0) {
			continue
		}
		k := loopsFor(l).exp
		fs = append(fs, expForm{
			name:   k.name,
			exp:    func(dst, src []float32) { expfsWith(&k, dst, src) },
			swiglu: func(dst, g, u []float32, clamp, weight float32) { swigluWith(&k, dst, g, u, clamp, weight) },
		})
	}
	return fs
}
