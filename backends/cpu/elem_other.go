//go:build !amd64 || purego

package cpu

func mulToSIMD(simdForm, []float32, float32, []float32) int               { return 0 }
func mulAddSIMD(simdForm, []float32, float32, []float32) int              { return 0 }
func mulMulToSIMD(simdForm, []float32, float32, []float32, []float32) int { return 0 }
