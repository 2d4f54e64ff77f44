//go:build !amd64 || purego

package quant

func vectorKernels() (Kernels, bool) { return Kernels{}, false }
