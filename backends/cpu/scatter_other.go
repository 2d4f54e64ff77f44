//go:build !amd64 || purego

package cpu

func scatterNT(simdForm, []float32, int, []float32, int) bool { return false }
