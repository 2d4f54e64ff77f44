package expertcache

import (
	"testing"

	"github.com/ds4-go/ds4/internal/mmap"
	"github.com/stretchr/testify/require"
)

// TestCacheSlotsOnHugePages checks that the cache's slots ask for
// transparent huge pages, where the kernel grants them on request: direct
// reads into them go to the device in far fewer requests.
func TestCacheSlotsOnHugePages(t *testing.T) {
	if setting, ok := mmap.HugeOnRequest(); !ok {
		t.Skipf("no transparent huge pages on request here (%s)", setting)
	}
	c, _, _ := openTestCache(t, Options{Slots: 1024})
	require.GreaterOrEqual(t, len(c.buf), 16<<20)
	for i := 0; i < len(c.buf); i += align {
		c.buf[i] = 1
	}
	huge, err := mmap.HugeBytes(c.buf)
	require.NoError(t, err)
	require.Positive(t, huge, "no huge pages behind the slots")
}
