//go:build !amd64 || purego

package cpu

func scatterNT(dst []float32, ds int, out []float32, n int) bool { return false }
