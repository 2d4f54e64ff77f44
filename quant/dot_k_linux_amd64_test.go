//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/internal/cpufeat"
	"golang.org/x/sys/unix"
)

// The AVX2 K-quant kernels must return the pure-Go kernels' results bit for
// bit: the integer sums are exact either way and the float operations are
// the same ones in the same order. The reference kernels are themselves
// checked against an independent decoding in dot_test.go.

// avx2KKernel is one AVX2 kernel with its reference, weight type and
// lowest activation code: -128 where the kernel takes the whole int8
// range, -127 where it needs QuantizeQ8K's range.
type avx2KKernel struct {
	t       Type
	avx2    func([]byte, []BlockQ8K) float32
	ref     func([]byte, []BlockQ8K) float32
	minCode int8
}

// avx2KKernels returns the kernels under test, skipping the test on a CPU
// that cannot run them.
func avx2KKernels(tb testing.TB) []avx2KKernel {
	tb.Helper()
	if cpufeat.Host().CPULevel() < cpufeat.AVX2 {
		tb.Skip("CPU lacks AVX2, FMA or F16C")
	}
	return []avx2KKernel{
		{IQ2_XXS, dotIQ2XXSAVX2, DotIQ2XXS, -127},
		{Q2_K, dotQ2KAVX2, DotQ2K, -128},
		{Q4_K, dotQ4KAVX2, DotQ4K, -128},
	}
}

// randQ8KRaw returns nb Q8_K blocks with uniformly random codes from
// minCode to 127, random 16-element sums over the whole int16 range (the
// kernels must use them as given, not recompute them) and random scales of
// either sign.
func randQ8KRaw(r *rand.Rand, nb int, minCode int8) []BlockQ8K {
	y := make([]BlockQ8K, nb)
	for b := range y {
		y[b].D = float32(r.NormFloat64())
		for i := range y[b].Qs {
			y[b].Qs[i] = max(int8(r.Uint32()), minCode)
		}
		for g := range y[b].Bsums {
			y[b].Bsums[g] = int16(r.Uint32())
		}
	}
	return y
}

// tinyQ8K returns the nb blocks QuantizeQ8K makes of subnormal floats,
// every other block's negated (d = ∓0 and codes 0), with every code then
// set to -128 and the sums to match: a block of zero D may hold any codes
// in every kernel's domain, and its term is ±0 or NaN whatever they sum to.
func tinyQ8K(t *testing.T, nb int) []BlockQ8K {
	t.Helper()
	x := make([]float32, nb*QK_K)
	for i := range x {
		x[i] = math.Float32frombits(uint32(1 + i%QK_K))
		if i/QK_K%2 == 1 {
			x[i] = -x[i]
		}
	}
	y := make([]BlockQ8K, nb)
	QuantizeQ8K(x, y)
	for b := range y {
		require.Zero(t, y[b].D, "block %d: d", b)
		require.Equal(t, [QK_K]int8{}, y[b].Qs, "block %d: codes", b)
		for i := range y[b].Qs {
			y[b].Qs[i] = -128
		}
		for g := range y[b].Bsums {
			y[b].Bsums[g] = -128 * 16
		}
	}
	return y
}

// requireSameBits fails unless got and want are the same float32 bits, or
// both NaN.
func requireSameBits(t *testing.T, want, got float32, msg string, args ...any) {
	t.Helper()
	if math.IsNaN(float64(want)) && math.IsNaN(float64(got)) {
		return
	}
	require.Equal(t, math.Float32bits(want), math.Float32bits(got),
		"%s: avx2 %v, go %v", fmt.Sprintf(msg, args...), got, want)
}

func TestAVX2KQuantRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, k := range avx2KKernels(t) {
		t.Run(k.t.String(), func(t *testing.T) {
			for trial := range 300 {
				nb := 1 + r.IntN(24)
				w := randWeightRow(r, k.t, nb)
				var y []BlockQ8K
				if trial%2 == 0 {
					y = make([]BlockQ8K, nb)
					QuantizeQ8K(randActivation(r, nb*QK_K), y)
				} else {
					y = randQ8KRaw(r, nb, k.minCode)
				}
				requireSameBits(t, k.ref(w, y), k.avx2(w, y), "trial %d, %d blocks", trial, nb)
			}
		})
	}
}

func TestAVX2KQuantEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	fill := func(w []byte, v byte) []byte {
		for i := range w {
			w[i] = v
		}
		return w
	}
	q8 := func(nb int, code int8, bsum int16, d float32) []BlockQ8K {
		y := make([]BlockQ8K, nb)
		for b := range y {
			y[b].D = d
			for i := range y[b].Qs {
				y[b].Qs[i] = code
			}
			for g := range y[b].Bsums {
				y[b].Bsums[g] = bsum
			}
		}
		return y
	}
	// setF16 writes h into every f16 scale field of w.
	setF16 := func(t Type, w []byte, h uint16) []byte {
		bb := t.BlockBytes()
		for off := 0; off < len(w); off += bb {
			switch t {
			case IQ2_XXS:
				binary.LittleEndian.PutUint16(w[off:], h)
			case Q2_K:
				binary.LittleEndian.PutUint16(w[off+80:], h)
				binary.LittleEndian.PutUint16(w[off+82:], h^0x8000)
			case Q4_K:
				binary.LittleEndian.PutUint16(w[off:], h)
				binary.LittleEndian.PutUint16(w[off+2:], h^0x8000)
			}
		}
		return w
	}
	for _, k := range avx2KKernels(t) {
		bb := k.t.BlockBytes()
		tests := []struct {
			name string
			w    []byte
			y    []BlockQ8K
		}{
			// Largest codes, scales, grid magnitudes and all signs set,
			// against the extreme activation codes: no int16 pair sum may
			// saturate and the lowest code must not lose its sign.
			{"ones by min", setF16(k.t, fill(make([]byte, 3*bb), 0xff), 0x3c00), q8(3, k.minCode, math.MinInt16, 1)},
			{"ones by 127", setF16(k.t, fill(make([]byte, 3*bb), 0xff), 0x3c00), q8(3, 127, math.MaxInt16, -1)},
			{"zeros by min", setF16(k.t, make([]byte, 2*bb), 0x3c00), q8(2, k.minCode, math.MinInt16, 1)},
			{"random by min", setF16(k.t, randWeightRow(r, k.t, 4), 0x3555), q8(4, k.minCode, -2048, 0.25)},
			{"random by 127", randWeightRow(r, k.t, 4), q8(4, 127, 2032, 0.5)},
			// Subnormal, zero and infinite scales go through the same
			// float steps (infinity makes NaNs or infinities alike).
			{"subnormal scale", setF16(k.t, randWeightRow(r, k.t, 2), 0x0001), randQ8KRaw(r, 2, k.minCode)},
			{"zero scale", setF16(k.t, randWeightRow(r, k.t, 2), 0x0000), randQ8KRaw(r, 2, k.minCode)},
			{"inf scale", setF16(k.t, randWeightRow(r, k.t, 2), 0x7c00), randQ8KRaw(r, 2, k.minCode)},
			{"zero activation", randWeightRow(r, k.t, 2), make([]BlockQ8K, 2)},
			// Blocks of d = ∓0, as QuantizeQ8K makes them of floats too
			// small for a finite scale, holding codes of -128: every
			// kernel must weigh them by that zero (or Inf by NaN) as the
			// reference does.
			{"subnormal activation", randWeightRow(r, k.t, 3), tinyQ8K(t, 3)},
			{"subnormal activation, inf scale", setF16(k.t, randWeightRow(r, k.t, 3), 0x7c00), tinyQ8K(t, 3)},
			// A row longer than the activation: only len(y) blocks count.
			{"long row", randWeightRow(r, k.t, 5), randQ8KRaw(r, 3, k.minCode)},
			{"no blocks", nil, nil},
		}
		for _, tc := range tests {
			t.Run(k.t.String()+"/"+tc.name, func(t *testing.T) {
				requireSameBits(t, k.ref(tc.w, tc.y), k.avx2(tc.w, tc.y), "%s", tc.name)
			})
		}
		t.Run(k.t.String()+"/short row panics", func(t *testing.T) {
			w := randWeightRow(r, k.t, 2)
			y := randQ8KRaw(r, 3, k.minCode)
			require.Panics(t, func() { k.ref(w, y) })
			require.Panics(t, func() { k.avx2(w, y) })
		})
	}
}

// TestAVX2IQ2XXSEveryIndex runs every grid index and every sign index
// through the kernel, each in every position of its group.
func TestAVX2IQ2XXSEveryIndex(t *testing.T) {
	avx2KKernels(t)
	r := rand.New(rand.NewPCG(25, 26))
	const nb = 8 // 8 blocks · 8 groups · 4 slots = 256 grid and sign slots
	for rot := range 4 {
		w := randWeightRow(r, IQ2_XXS, nb)
		for b := range nb {
			for g := range 8 {
				grp := w[b*66+2+8*g:]
				a1 := uint32(r.IntN(16)) << 28
				for l := range 4 {
					slot := (b*32 + g*4 + l + rot*64) % 256
					grp[l] = byte(slot)
					a1 |= uint32(slot%128) << (7 * l)
				}
				binary.LittleEndian.PutUint32(grp[4:], a1)
			}
		}
		y := randQ8KRaw(r, nb, -127)
		requireSameBits(t, DotIQ2XXS(w, y), dotIQ2XXSAVX2(w, y), "rotation %d", rot)
	}
}

func TestAVX2KQuantAllocFree(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	for _, k := range avx2KKernels(t) {
		y := randQ8KRaw(r, 16, k.minCode)
		w := randWeightRow(r, k.t, 16)
		var sink float32
		allocs := testing.AllocsPerRun(100, func() { sink += k.avx2(w, y) })
		require.Zero(t, allocs, "%v allocates (sink %v)", k.t, sink)
	}
}

// guardedTail returns n bytes that end exactly where an inaccessible page
// begins, so that reading past them faults.
func guardedTail(t *testing.T, n int) []byte {
	t.Helper()
	page := unix.Getpagesize()
	size := (n+page-1)/page*page + page
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(mem) })
	require.NoError(t, unix.Mprotect(mem[size-page:], unix.PROT_NONE))
	return mem[size-page-n : size-page]
}

func TestAVX2KQuantNoOverread(t *testing.T) {
	// The row and the activation both end at a guard page: a kernel that
	// loads a byte beyond either faults.
	r := rand.New(rand.NewPCG(27, 28))
	const nb = 3
	for _, k := range avx2KKernels(t) {
		t.Run(k.t.String(), func(t *testing.T) {
			w := guardedTail(t, nb*k.t.BlockBytes())
			copy(w, randWeightRow(r, k.t, nb))
			ymem := guardedTail(t, nb*int(unsafe.Sizeof(BlockQ8K{})))
			y := unsafe.Slice((*BlockQ8K)(unsafe.Pointer(&ymem[0])), nb)
			copy(y, randQ8KRaw(r, nb, k.minCode))
			requireSameBits(t, k.ref(w, y), k.avx2(w, y), "guarded")
		})
	}
}

// FuzzAVX2KQuant checks the AVX2 kernels against the pure-Go ones on
// arbitrary weight bytes and activation codes.
func FuzzAVX2KQuant(f *testing.F) {
	f.Add([]byte{}, []byte{}, float32(1))
	f.Add(make([]byte, 144), []byte{0x80}, float32(-1))
	f.Add([]byte{0xff, 0xff, 0x00, 0x3c}, []byte{0x7f, 0x80, 0x01}, float32(0.5))
	f.Fuzz(func(t *testing.T, wseed, yseed []byte, d float32) {
		ks := avx2KKernels(t)
		// The activation: yseed repeated over one or two blocks, its
		// codes raised to the kernel's lowest.
		nb := 1 + len(yseed)%2
		for _, k := range ks {
			y := make([]BlockQ8K, nb)
			for b := range y {
				y[b].D = d
				for i := range y[b].Qs {
					if len(yseed) > 0 {
						y[b].Qs[i] = max(int8(yseed[(b*QK_K+i)%len(yseed)]), k.minCode)
					}
				}
				for g := range y[b].Bsums {
					var s int16
					for _, q := range y[b].Qs[16*g : 16*g+16] {
						s += int16(q)
					}
					y[b].Bsums[g] = s
				}
			}
			w := make([]byte, nb*k.t.BlockBytes())
			for i := range w {
				if len(wseed) > 0 {
					w[i] = wseed[i%len(wseed)] ^ byte(i*7)
				}
			}
			requireSameBits(t, k.ref(w, y), k.avx2(w, y), "%v", k.t)
		}
	})
}

// TestPrefetchTile runs the AVX-512 packs' request for the next rows,
// which no AVX2 machine reaches through them, on rows ending at an
// inaccessible page and on rows too short to be a tile.
func TestPrefetchTile(t *testing.T) {
	const rowBytes = 66 * 16
	next := guardedTail(t, Q8_0TileRows*rowBytes)
	prefetchTile(next, rowBytes)
	prefetchTile(next[:len(next)-1], rowBytes)
	prefetchTile(nil, rowBytes)
}
