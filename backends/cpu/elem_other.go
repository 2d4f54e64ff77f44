//go:build !amd64 || purego

package cpu

func mulToSIMD(dst []float32, s float32, x []float32) int       { return 0 }
func mulAddSIMD(acc []float32, s float32, x []float32) int      { return 0 }
func mulMulToSIMD(dst []float32, s float32, x, w []float32) int { return 0 }
