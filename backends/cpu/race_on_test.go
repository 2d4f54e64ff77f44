//go:build race

package cpu

// raceEnabled is set when the race detector, which makes sync.Pool drop
// items at random, is on: allocation counts are meaningless then.
const raceEnabled = true
