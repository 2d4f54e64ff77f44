//go:build amd64 && !purego

package quant

import "github.com/ds4-go/ds4/internal/cpufeat"

// actFor returns the AVX2 forms at level AVX2 and above, else the Go
// code.
func actFor(l cpufeat.Level) actForm {
	if l < cpufeat.AVX2 {
		return actGo
	}
	return actAVX2
}

// quantizeQ8_0Full quantizes the len(dst) whole blocks of x in form f and
// returns how many it did: all of them with AVX2, none with Go.
func quantizeQ8_0Full(f actForm, x []float32, dst []BlockQ8_0) int {
	if f == actGo || len(dst) == 0 {
		return 0
	}
	x = x[:32*len(dst)]
	quantizeQ8_0AVX2(&x[0], &dst[0], len(dst))
	return len(dst)
}

// quantizeQ8_0AVX2 quantizes nb blocks of 32 floats at x into dst, as
// quantizeQ8_0Act does for a whole block (nb > 0).
//
//go:noescape
func quantizeQ8_0AVX2(x *float32, dst *BlockQ8_0, nb int)

// quantizeQ8KFull quantizes the len(dst) blocks of x in form f and
// returns how many it did: all of them with AVX2, none with Go.
func quantizeQ8KFull(f actForm, x []float32, dst []BlockQ8K) int {
	if f == actGo || len(dst) == 0 {
		return 0
	}
	x = x[:QK_K*len(dst)]
	quantizeQ8KAVX2(&x[0], &dst[0], len(dst))
	return len(dst)
}

// quantizeQ8KAVX2 quantizes nb blocks of 256 floats at x into dst, as
// quantizeQ8KBlock does (nb > 0).
//
//go:noescape
func quantizeQ8KAVX2(x *float32, dst *BlockQ8K, nb int)
