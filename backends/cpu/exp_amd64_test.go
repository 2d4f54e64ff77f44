//go:build amd64 && !purego

package cpu

// expForms returns expfs and the SwiGLU as each vector form this CPU can
// run does them (AVX-512 and AVX2 on an AVX-512 CPU), so that every form
// is held to the scalar code, not only the one expfs picks; where it has
// none, the scalar loops.
func expForms() []expForm {
	fs := []expForm{}
	if len(expLevels()) == 0 {
		fs = append(fs, expForm{"go", expfs, swiglu})
	}
	for _, k := range expLevels() {
		fs = append(fs, expForm{
			name: k.name,
			exp:  func(dst, src []float32) { expfsWith(&k, dst, src) },
			swiglu: func(dst, g, u []float32, clamp, weight float32) {
				if clamp != clamp || weight != weight {
					swigluGo(dst, g, u, clamp, weight)
					return
				}
				swigluWith(&k, dst, g, u, clamp, weight)
			},
		})
	}
	return fs
}
