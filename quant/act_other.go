//go:build !amd64 || purego

package quant

import "github.com/ds4-go/ds4/internal/cpufeat"

// actFor returns the Go code: there is no SIMD form for this architecture
// or build.
func actFor(cpufeat.Level) actKernels { return goAct }
