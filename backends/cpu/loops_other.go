//go:build !amd64 || purego

package cpu

import "github.com/ds4-go/ds4/internal/cpufeat"

// loopsFor returns the Go loops: there is no assembly for this
// architecture or build.
func loopsFor(cpufeat.Level) loops { return goLoops() }
