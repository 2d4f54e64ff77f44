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
	elem    elemKernels
	scatter scatterKernels
}

// goName is the name of every Go form.
const goName = "go"

// goLoops returns the Go forms of every loop.
func goLoops() loops {
	return loops{vec: genericVecOps(), exp: expKernels{name: goName}, elem: elemGo, scatter: scatterGo}
}

// hostLoops are the loops of the host's level, DS4_PUREGO included
// (cpufeat.Host), chosen once at start-up. The package's functions run
// them; a backend's attention runs the vecOps of its dot kernels
// (vecOpsFor).
var hostLoops = loopsFor(cpufeat.Host().Level())

// elemKernels are vector forms of the elementwise loops of elem.go: each
// does the first elements of its loop and returns how many it did, the
// rest left to the Go loop.
type elemKernels struct {
	name     string
	mulTo    func(dst []float32, s float32, x []float32) int
	mulAdd   func(acc []float32, s float32, x []float32) int
	mulMulTo func(dst []float32, s float32, x, w []float32) int
}

// elemGo leaves every element to the Go loops.
var elemGo = elemKernels{
	name:     goName,
	mulTo:    func([]float32, float32, []float32) int { return 0 },
	mulAdd:   func([]float32, float32, []float32) int { return 0 },
	mulMulTo: func([]float32, float32, []float32, []float32) int { return 0 },
}

// scatterKernels are a form of scatterTile's non-temporal stores: nt does
// scatterTile with them where it can and reports whether it did.
type scatterKernels struct {
	name string
	nt   func(dst []float32, ds int, out []float32, n int) bool
}

// scatterGo has no non-temporal stores.
var scatterGo = scatterKernels{name: goName, nt: func([]float32, int, []float32, int) bool { return false }}
