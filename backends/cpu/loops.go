package cpu

import "github.com/ds4-go/ds4/internal/cpufeat"

// loops are the forms of this package's float32 loops at one
// instruction-set level (cpufeat.Level): attention's dot and axpy, the
// exponentials and the SwiGLU, the elementwise mixes and the
// non-temporal scatter. Each names its form, "go" for the Go loops;
// loopsFor returns those of a level.
type loops struct {
	vec     vecOps
	exp     expKernels
	elem    simdForm // the elementwise mixes of elem.go: go or avx2
	scatter simdForm // scatterTile's non-temporal stores: go (none), avx2 or avx512
}

// goName is the name of every Go form.
const goName = "go"

// goLoops returns the Go forms of every loop.
func goLoops() loops {
	return loops{vec: genericVecOps(), exp: expKernels{name: goName}}
}

// hostLoops are the loops of the host's level, DS4_PUREGO included
// (cpufeat.Host), chosen once at start-up. The package's functions run
// them; a backend's attention runs the vecOps of its dot kernels
// (vecOpsFor).
var hostLoops = loopsFor(cpufeat.Host().Level())

// simdForm is the form of a loop that has at most one vector form per
// instruction set; the loop calls it directly (no function value, so its
// arguments do not escape).
type simdForm uint8

const (
	formGo     simdForm = iota // the Go loop
	formAVX2                   // AVX2 and FMA
	formAVX512                 // AVX-512 F and VL
)

// String returns the form's name: "go", "avx2" or "avx512".
func (f simdForm) String() string {
	switch f {
	case formAVX2:
		return "avx2"
	case formAVX512:
		return "avx512"
	}
	return goName
}
