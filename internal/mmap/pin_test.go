package mmap

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPinRegions checks both ways of pinning: locks that all succeed are
// kept until Unpin; a refused lock releases those taken and populates
// every region instead, saying why.
func TestPinRegions(t *testing.T) {
	regions := [][]byte{make([]byte, 10000), nil, make([]byte, 300)}
	for _, c := range []struct {
		name    string
		refuse  int // the lock call that fails; -1 for none
		how     string
		unlocks int
	}{
		{"locked", -1, Locked, 0},
		{"refused first", 0, Populated, 0},
		{"refused second", 1, Populated, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var locks, unlocks int
			lock := func(b []byte) error {
				require.NotEmpty(t, b)
				locks++
				if locks-1 == c.refuse {
					return errors.New("refused")
				}
				return nil
			}
			unlock := func([]byte) error { unlocks++; return nil }
			p := pin(regions, lock, unlock)
			require.Equal(t, c.how, p.How)
			require.Equal(t, int64(10300), p.Bytes)
			require.Equal(t, c.unlocks, unlocks)
			if c.how == Populated {
				require.ErrorContains(t, p.Err, "refused")
				return
			}
			require.NoError(t, p.Err)
			p.Unpin()
			require.Equal(t, 2, unlocks)
			p.Unpin()
			require.Equal(t, 2, unlocks, "Unpin twice unlocks once")
		})
	}
	p := PinRegions(regions) // the real calls: locked, or populated where refused
	require.Contains(t, []string{Locked, Populated}, p.How)
	p.Unpin()
}
