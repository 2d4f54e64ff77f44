//go:build race

package engine

// raceEnabled is set when the race detector, which makes sync.Pool drop
// items at random, is on: allocation counts are meaningless then.
const raceEnabled = true
