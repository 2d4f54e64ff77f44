//go:build !amd64 || purego

package cpu

// expForms returns expfs and the SwiGLU of this build: the scalar loops.
func expForms() []expForm { return []expForm{{"go", expfs, swiglu}} }
