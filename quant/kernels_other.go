//go:build !amd64 || purego

package quant

import "github.com/ds4-go/ds4/internal/cpufeat"

// kernelSets returns no set: there are no vector kernels for this
// architecture or build.
func kernelSets(cpufeat.Level) []Kernels { return nil }
