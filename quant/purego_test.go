package quant

import (
	"testing"

	"github.com/ds4-go/ds4/internal/cpufeat/cpufeattest"
)

// TestPureGoReachesEveryKernel checks that under DS4_PUREGO=1 (set for a
// child process when the run does not set it) the dot kernels and the
// activation quantizers the package runs are the pure-Go ones.
func TestPureGoReachesEveryKernel(t *testing.T) {
	if !cpufeattest.UnderPureGo(t) {
		return
	}
	if k := BestKernels(); !k.Generic() {
		t.Errorf("BestKernels = %s, want go", k.Name)
	}
	if hostAct != actGo {
		t.Errorf("activation quantizers: %s, want go", hostAct)
	}
}
