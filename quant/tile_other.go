//go:build !amd64 || purego

package quant

// q8_0SumsFull does no blocks: there is no SIMD form of Q8_0Sums here.
func q8_0SumsFull(x []BlockQ8_0, sums []int32) int { return 0 }
