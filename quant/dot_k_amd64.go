//go:build amd64 && !purego

package quant

// Placeholders until the assembly lands (issue 10): each returns the
// reference result.

func dotQ2KAVX2(w []byte, y []BlockQ8K) float32 { return DotQ2K(w, y) }

func dotQ4KAVX2(w []byte, y []BlockQ8K) float32 { return DotQ4K(w, y) }

func dotIQ2XXSAVX2(w []byte, y []BlockQ8K) float32 { return DotIQ2XXS(w, y) }
