//go:build !amd64 || purego

package probe

func readSum(b []byte) uint64 { return readSumGo(b) }

func fmaLoop(n int) float32 { return fmaLoopGo(n) }

func dotI8Loop(n int) int32 { return dotI8LoopGo(n) }

func dotQ8_0Loop(n int) int32 { return dotI8LoopGo(n) }

const hasVNNI = false

func dotVNNILoop(n int) int32 { return int32(4 * n) }
