//go:build !amd64 || purego

package quant

func vectorKernelSets() []Kernels { return nil }
