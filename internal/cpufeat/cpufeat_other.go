//go:build !amd64 || purego

package cpufeat

// cpuFeatures reports no extension: the kernels have no assembly for this
// architecture or build.
func cpuFeatures() Features { return Features{} }
