package cpu

import (
	"testing"

	"github.com/ds4-go/ds4/internal/cpufeat"
	"github.com/ds4-go/ds4/internal/cpufeat/cpufeattest"
	"github.com/ds4-go/ds4/quant"
)

// cpuLevel is this CPU's level, whatever DS4_PUREGO says: the tests hold
// every form the CPU can run to the Go loops.
func cpuLevel() cpufeat.Level { return cpufeat.Host().CPULevel() }

// hasAVX2 and hasAVX512 report whether this CPU runs the AVX2 and the
// AVX-512 forms.
func hasAVX2() bool   { return loopsFor(cpuLevel()).vec.name != goName }
func hasAVX512() bool { return hasAVX2() && cpuLevel() >= cpufeat.AVX512 }

// simdVecOps returns the SIMD dot and axpy of this CPU, and false where it
// has none.
func simdVecOps() (vecOps, bool) {
	v := loopsFor(cpuLevel()).vec
	return v, v.name != goName
}

// names returns the names of the forms of l: vec, exp, elem, scatter.
func (l loops) names() [4]string {
	return [4]string{l.vec.name, l.exp.name, l.elem.String(), l.scatter.String()}
}

// TestPureGoReachesEveryKernel checks that under DS4_PUREGO=1 (set for a
// child process when the run does not set it) every loop of the package
// and of a default backend is the Go one: its dot kernels, attention's
// float loops, the exponentials, the elementwise mixes and the scatter.
func TestPureGoReachesEveryKernel(t *testing.T) {
	if !cpufeattest.UnderPureGo(t) {
		return
	}
	if got := hostLoops.names(); got != [4]string{goName, goName, goName, goName} {
		t.Errorf("loops %q, want go throughout", got)
	}
	if hostLoops.exp.exp != nil || hostLoops.exp.swiglu != nil {
		t.Error("exp kernels set under pure Go")
	}
	be := New(1)
	defer be.Close()
	if k := be.Kernels(); !k.Generic() {
		t.Errorf("dot kernels %s, want go", k.Name)
	}
	if be.vec.name != goName {
		t.Errorf("attention loops %s, want go", be.vec.name)
	}
	if k := quant.BestKernels(); !k.Generic() {
		t.Errorf("quant.BestKernels = %s, want go", k.Name)
	}
}
