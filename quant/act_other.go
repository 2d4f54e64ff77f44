//go:build !amd64 || purego

package quant

import "github.com/ds4-go/ds4/internal/cpufeat"

// actFor returns the Go code: there is no SIMD form for this architecture
// or build.
func actFor(cpufeat.Level) actForm { return actGo }

func quantizeQ8_0Full(actForm, []float32, []BlockQ8_0) int { return 0 }

func quantizeQ8KFull(actForm, []float32, []BlockQ8K) int { return 0 }

func q8_0SumsFull(actForm, []BlockQ8_0, []int32) int { return 0 }
