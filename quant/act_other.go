//go:build !amd64 || purego

package quant

func quantizeQ8_0Full(x []float32, dst []BlockQ8_0) int { return 0 }

func quantizeQ8KFull(x []float32, dst []BlockQ8K) int { return 0 }
