//go:build amd64 && !purego

package cpu

import (
	"testing"

	"github.com/ds4-go/ds4/internal/cpufeat"
)

// TestLoopsByLevel checks the form of every loop each level gets, whatever
// this CPU has: only names are compared, nothing runs.
func TestLoopsByLevel(t *testing.T) {
	for _, tc := range []struct {
		l    cpufeat.Level
		want [4]string // vec, exp, elem, scatter
	}{
		{cpufeat.Generic, [4]string{"go", "go", "go", "go"}},
		{cpufeat.AVX2, [4]string{"avx2", "avx2", "avx2", "avx2"}},
		{cpufeat.AVX512, [4]string{"avx512", "avx512", "avx2", "avx512"}},
		{cpufeat.AVX512VNNI, [4]string{"avx512", "avx512", "avx2", "avx512"}},
		{cpufeat.AVX512VBMI, [4]string{"avx512", "avx512", "avx2", "avx512"}},
	} {
		if got := loopsFor(tc.l).names(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.l, got, tc.want)
		}
	}
	if got := loopsFor(cpufeat.Host().Level()).names(); got != hostLoops.names() {
		t.Errorf("hostLoops %q, want those of the host's level %v", hostLoops.names(), cpufeat.Host().Level())
	}
}
