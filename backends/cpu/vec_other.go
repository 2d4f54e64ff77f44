//go:build !amd64 || purego

package cpu

func simdVecOps() (vecOps, bool) { return vecOps{}, false }

// prefetch does nothing where the loops are not assembly.
func prefetch([]byte) {}
