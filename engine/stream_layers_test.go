package engine

import (
	"os"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/internal/mmap"
)

// TestExpertLayers checks that the spans ExpertLayers computes hold, in
// the file, the bytes the mapped model's matrices give for every expert,
// and that ResidentTensors leaves out exactly the routed stacks.
func TestExpertLayers(t *testing.T) {
	p := layout.Tiny()
	path := tinyFile(t, layout.RecipeQ2)
	m, err := Open(path)
	require.NoError(t, err)
	defer m.File.Close()
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()

	layers, _, err := m.ExpertLayers()
	require.NoError(t, err)
	require.Len(t, layers, p.Layers)
	for il, l := range layers {
		require.Equal(t, p.Experts, l.Experts)
		ml := &m.Layers[il]
		for _, c := range []struct {
			name string
			span int64
			size int64
			get  func(e int) []byte
		}{
			{"gate", l.Gate.Offset, l.Gate.Bytes, func(e int) []byte { return ml.GateExps.Expert(e).Data }},
			{"up", l.Up.Offset, l.Up.Bytes, func(e int) []byte { return ml.UpExps.Expert(e).Data }},
			{"down", l.Down.Offset, l.Down.Bytes, func(e int) []byte { return ml.DownExps.Expert(e).Data }},
		} {
			for e := range l.Experts {
				want := c.get(e)
				require.Equal(t, int64(len(want)), c.size, "layer %d %s", il, c.name)
				got := make([]byte, c.size)
				_, err := fd.ReadAt(got, c.span+int64(e)*c.size)
				require.NoError(t, err)
				require.Equal(t, want, got, "layer %d %s expert %d", il, c.name, e)
			}
		}
	}

	resident := ResidentTensors(m)
	require.Len(t, resident, len(m.File.Tensors)-3*p.Layers)
	var sum int64
	for _, ti := range resident {
		require.NotContains(t, ti.Name, "_exps.")
		sum += int64(ti.Size)
	}
	require.Equal(t, sum, ResidentBytes(m))
}

// TestPinResident pins the resident tensors of a mapped synthetic model:
// locked, or populated with the reason where locking is refused. The
// pinned regions, rounded out to whole pages as the kernel locks them,
// reach into no expert stack but for the part of a page it shares with
// a resident neighbour at either end.
func TestPinResident(t *testing.T) {
	path := tinyFile(t, layout.RecipeQ2)
	m, err := Open(path)
	require.NoError(t, err)
	defer m.File.Close()

	pin := PinResident(m)
	defer pin.Unpin()
	require.Equal(t, PinnedBytes(m), pin.Bytes)
	require.Less(t, pin.Bytes, ResidentBytes(m), "the embedding is left out")
	if pin.How == mmap.Populated {
		require.Error(t, pin.Err)
		t.Logf("locking refused, populated: %v", pin.Err)
	} else {
		require.Equal(t, mmap.Locked, pin.How)
	}

	// File offsets of the mapped bytes, from the mapping's base (page
	// aligned, offset 0 of the file).
	t0 := m.File.Tensors[0]
	base := uintptr(unsafe.Pointer(unsafe.SliceData(m.File.TensorData(t0)))) - uintptr(m.File.DataOffset+t0.Offset)
	page := int64(os.Getpagesize())
	type span struct{ lo, hi int64 }
	var stacks []span
	layers, _, err := m.ExpertLayers()
	require.NoError(t, err)
	for _, l := range layers {
		for _, s := range []struct{ off, n int64 }{{l.Gate.Offset, l.Gate.Bytes}, {l.Up.Offset, l.Up.Bytes}, {l.Down.Offset, l.Down.Bytes}} {
			stacks = append(stacks, span{s.off, s.off + int64(l.Experts)*s.n})
		}
	}
	regions := residentRegions(m)
	require.Len(t, regions, len(ResidentTensors(m))-1)
	for _, r := range regions {
		lo := int64(uintptr(unsafe.Pointer(unsafe.SliceData(r))) - base)
		hi := lo + int64(len(r))
		lo, hi = lo/page*page, (hi+page-1)/page*page
		for _, s := range stacks {
			// The overlap must lie in the stack's first or last page.
			olo, ohi := max(lo, s.lo), min(hi, s.hi)
			if olo >= ohi {
				continue
			}
			first := (s.lo + page - 1) / page * page
			last := s.hi / page * page
			require.True(t, ohi <= first || olo >= last,
				"pinned [%d,%d) reaches into expert stack [%d,%d) at [%d,%d)", lo, hi, s.lo, s.hi, olo, ohi)
		}
	}
}

// TestScratchMemory sums the buffers newScratch allocates and checks
// ScratchMemory's count of them, for one token and for a chunk.
func TestScratchMemory(t *testing.T) {
	for _, n := range []int{1, 7, 64} {
		sc := reflect.ValueOf(newScratch(layout.Tiny(), n)).Elem()
		var got int64
		for i := range sc.NumField() {
			f := sc.Field(i)
			if f.Kind() == reflect.Slice {
				switch f.Type().Elem().Kind() {
				case reflect.Float32:
					got += 4 * int64(f.Len())
				case reflect.Int, reflect.Pointer:
					got += 8 * int64(f.Len())
				}
			}
		}
		require.Equal(t, got, ScratchMemory(layout.Tiny(), n), "n=%d", n)
	}
}
