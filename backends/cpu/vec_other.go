//go:build !amd64 || purego

package cpu

func simdVecOps() (vecOps, bool) { return vecOps{}, false }
