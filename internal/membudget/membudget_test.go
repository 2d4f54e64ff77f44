package membudget

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAvailable reads fake /proc and /sys trees: cgroup v1 and v2 limits,
// the tightest of a group and its ancestors, a container's cgroup mounted
// as the root, and MemAvailable when no limit is set.
func TestAvailable(t *testing.T) {
	for _, c := range []struct {
		tree string
		want Memory
	}{
		{"v1", Memory{4 << 30, "cgroup v1 memory.limit_in_bytes"}},
		{"v1none", Memory{8000000 * 1024, "MemAvailable"}},
		{"v2", Memory{2 << 30, "cgroup v2 memory.max"}},
		{"v2container", Memory{1 << 30, "cgroup v2 memory.max"}},
		{"v2max", Memory{8000000 * 1024, "MemAvailable"}},
	} {
		t.Run(c.tree, func(t *testing.T) {
			got, err := Available(filepath.Join("testdata", c.tree))
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	_, err := Available(filepath.Join("testdata", "missing"))
	require.Error(t, err)
}

func TestCgroups(t *testing.T) {
	for _, c := range []struct {
		in     string
		v2, v1 string
	}{
		{"0::/a/b\n", "/a/b", ""},
		{"4:memory:/x\n0::/\n", "/", "/x"},
		{"5:cpu,memory:/y\n", "", "/y"},
		{"1:name=systemd:/\n3:cpuacct:/z\n", "", ""},
		{"", "", ""},
	} {
		v2, v1 := Cgroups(c.in)
		require.Equal(t, c.v2, v2, c.in)
		require.Equal(t, c.v1, v1, c.in)
	}
}

func TestParseLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4294967296\n", 4 << 30, true},
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false},
		{"0", 0, false},
		{"junk", 0, false},
	} {
		got, ok := ParseLimit(c.in)
		require.Equal(t, c.ok, ok, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestMemAvailable(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal: 10 kB\nMemAvailable:   2048 kB\n", 2048 * 1024, true},
		{"MemAvailable: 7\n", 7, true},
		{"MemTotal: 10 kB\n", 0, false},
		{"MemAvailable: x kB\n", 0, false},
	} {
		got, err := MemAvailable(c.in)
		require.Equal(t, c.ok, err == nil, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestBudget(t *testing.T) {
	for _, c := range []struct {
		mem, resident, context, session, cache int64
	}{
		{10 << 30, 1 << 30, 512 << 20, 256 << 20, 8<<30 - 1<<30 - 768<<20},
		{1000, 100, 200, 300, 200},
		{1000, 900, 0, 0, 0}, // nothing left: 0, never negative
	} {
		s := Budget(c.mem, c.resident, c.context, c.session)
		require.Equal(t, c.cache, s.Cache, "%+v", c)
		require.Equal(t, Split{c.mem, c.resident, c.context, c.session, c.cache}, s)
	}
}
