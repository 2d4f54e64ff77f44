package quant

import (
	"encoding/binary"
	"math"
	"sync"
)

// IQ2_XXS weight quantizer (upstream ds4q_write_iq2_xxs_block, docs/formats/quant.md#iq2_xxs-quantizer).
// See quantize.go for why products are wrapped in float32().

// iq2MapSize covers every packed 8×2-bit level word whose fields are all ≤ 2
// (the largest is 0xAAAA = 43690), as upstream's map does.
const iq2MapSize = 43692

// iq2Neighbourhood maps packed level words to grid points. It is built once
// by iq2xxsNeighbours and never modified afterwards.
type iq2Neighbourhood struct {
	// grid[u] is the grid index whose levels pack to u, or -1 when u is not
	// a grid point.
	grid [iq2MapSize]int16
	// For an off-grid u, nb[start[u]:start[u+1]] lists the grid points at
	// the two smallest distinct squared distances from u, ordered by
	// (distance, grid index). Grid points have empty lists.
	start [iq2MapSize + 1]uint32
	nb    []uint8
	// levels[k] are the 8 levels (0, 1 or 2) of grid point k.
	levels [256][8]uint8
}

// iq2xxsNeighbours returns the shared IQ2_XXS neighbour map, building it on
// first use.
var iq2xxsNeighbours = sync.OnceValue(buildIQ2Neighbourhood)

func buildIQ2Neighbourhood() *iq2Neighbourhood {
	m := new(iq2Neighbourhood)
	for u := range m.grid {
		m.grid[u] = -1
	}
	for k, kg := range iq2xxsKGrid {
		m.grid[kg] = int16(k)
		for i := range 8 {
			m.levels[k][i] = uint8(kg >> (2 * i) & 3)
		}
	}
	// The squared distance between the coordinates 2l+1 of a word u and a
	// grid point splits into the distance over elements 0..3 (the low byte
	// of u) plus the distance over elements 4..7 (the high byte), so two
	// 256×256 tables of partial distances replace the per-element loop.
	// A partial distance is at most 4·6² = 144 and fits a byte.
	var lo, hi [256][256]uint8
	for b := range 256 {
		for k := range 256 {
			var dl, dh int
			for i := range 4 {
				f := b >> (2 * i) & 3
				a := 2 * (f - int(m.levels[k][i]))
				b := 2 * (f - int(m.levels[k][4+i]))
				dl += a * a
				dh += b * b
			}
			lo[b][k], hi[b][k] = uint8(dl), uint8(dh)
		}
	}
	m.nb = make([]uint8, 0, 1<<20)
	var dist [256]uint16
	for u := range iq2MapSize {
		m.start[u] = uint32(len(m.nb))
		if m.grid[u] >= 0 {
			continue
		}
		l, h := &lo[u&0xff], &hi[u>>8]
		d1, d2 := uint16(math.MaxUint16), uint16(math.MaxUint16)
		for k := range dist {
			d := uint16(l[k]) + uint16(h[k])
			dist[k] = d
			switch {
			case d < d1:
				d1, d2 = d, d1
			case d > d1 && d < d2:
				d2 = d
			}
		}
		for k, d := range dist {
			if d == d1 {
				m.nb = append(m.nb, uint8(k))
			}
		}
		for k, d := range dist {
			if d == d2 {
				m.nb = append(m.nb, uint8(k))
			}
		}
	}
	m.start[iq2MapSize] = uint32(len(m.nb))
	return m
}

// bestNeighbour returns the neighbour of the off-grid word u that minimizes
// Σ w[i]·(scale·(2l_i+1) − xv[i])², the first one on ties. If no distance
// compares below +MaxFloat32 (NaN input) it returns the first neighbour,
// where upstream would assert.
func (m *iq2Neighbourhood) bestNeighbour(u uint16, xv, w []float32, scale float32) int {
	xv, w = xv[:8], w[:8]
	list := m.nb[m.start[u]:m.start[u+1]]
	best := float32(math.MaxFloat32)
	idx := int(list[0])
	for _, k := range list {
		var d2 float32
		for i, l := range m.levels[k] {
			diff := float32(scale*float32(2*l+1)) - xv[i]
			d2 += float32(float32(w[i]*diff) * diff)
		}
		if d2 < best {
			best = d2
			idx = int(k)
		}
	}
	return idx
}

// nearestGridPoint rounds the 8 magnitudes xv at inverse scale id to levels
// {0, 1, 2} (coordinates 1, 3, 5) and returns that grid point, or when the
// rounded word is off the grid, the best neighbour at scale 1/id = scale.
func (m *iq2Neighbourhood) nearestGridPoint(xv, w []float32, id, scale float32) int {
	var u uint16
	for i, v := range xv[:8] {
		l := clampLevel(nearestInt(0.5*(float32(id*v)-1)), 0, 2)
		u |= uint16(l) << (2 * i)
	}
	if k := m.grid[u]; k >= 0 {
		return int(k)
	}
	return m.bestNeighbour(u, xv, w, scale)
}

// iq2Sums returns Σ w·x·q and Σ w·q·q over one 32-value group with the
// coordinates q = 2l+1 of the grid points gi of its four sub-groups.
func (m *iq2Neighbourhood) iq2Sums(xv, w []float32, gi *[4]int) (sumQX, sumQ2 float32) {
	xv, w = xv[:32], w[:32]
	for i := range xv {
		q := float32(2*m.levels[gi[i/8]][i%8] + 1)
		sumQX += float32(float32(w[i]*xv[i]) * q)
		sumQ2 += float32(float32(w[i]*q) * q)
	}
	return sumQX, sumQ2
}

// quantizeIQ2_XXSBlock writes one 66-byte IQ2_XXS block for the 256 values x
// with importance qw.
func quantizeIQ2_XXSBlock(m *iq2Neighbourhood, x, qw []float32, y []byte) {
	x = x[:QK_K]
	qw = qw[:QK_K]
	y = y[:66]
	var (
		q2       [16]uint32
		scales   [8]float32
		weight   [32]float32
		waux     [32]float32
		xv       [32]float32
		qpLevels [32]uint8
	)
	var sumX2 float32
	for _, v := range x {
		sumX2 += float32(v * v)
	}
	sigma2 := float32(sumX2 / QK_K) // float32(): see quantizeQ4_KWeighted
	var maxScale float32
	for ib := range 8 {
		xb, qwb := x[32*ib:32*ib+32], qw[32*ib:32*ib+32]
		for i, v := range xb {
			weight[i] = float32(qwb[i] * sqrtf(sigma2+float32(v*v)))
			waux[i] = sqrtf(weight[i])
		}
		// Only 7 sign bits per 8 values are stored; the eighth is implied
		// so that the count of negatives is even. With an odd count, the
		// value that matters least gets its sign flipped (its magnitude
		// becomes negative) before the search.
		var signs [4]uint8
		for k := range 4 {
			var s uint8
			n := 0
			for i := 8 * k; i < 8*k+8; i++ {
				if v := xb[i]; v >= 0 {
					xv[i] = v
				} else {
					xv[i] = -v
					n++
					s |= 1 << (i - 8*k)
				}
			}
			if n%2 != 0 {
				imin := 8 * k
				lowest := weight[imin] * xb[imin] * xb[imin]
				for i := 8*k + 1; i < 8*k+8; i++ {
					if e := weight[i] * xb[i] * xb[i]; e < lowest {
						lowest, imin = e, i
					}
				}
				xv[imin] = -xv[imin]
				s ^= 1 << (imin - 8*k)
			}
			signs[k] = s & 127
		}
		top := xv[0]
		for _, v := range xv[1:] {
			if !(top > v) {
				top = v
			}
		}
		if top < 1e-15 {
			continue // scale 0: grid index 0, sign index 0, scale code 0
		}
		// The codes of this fit are never used: when its scale is positive
		// the final pass below recomputes all levels.
		scale := fitSymmetric(xv[:], weight[:], qpLevels[:], 4)
		effMax := scale * 3
		if effMax <= 0 {
			continue
		}
		var gi, aux [4]int
		var best float32
		for is := -6; is <= 6; is++ {
			id := (5 + float32(float32(is)*float32(0.1))) / effMax
			s := 1 / id
			for k := range 4 {
				aux[k] = m.nearestGridPoint(xv[8*k:8*k+8], waux[8*k:8*k+8], id, s)
			}
			sumQX, sumQ2 := m.iq2Sums(xv[:], weight[:], &aux)
			if sumQ2 > 0 && float32(sumQX*sumQX) > float32(best*sumQ2) {
				scale = sumQX / sumQ2
				best = scale * sumQX
				gi = aux
			}
		}
		if scale > 0 {
			id := 1 / scale
			for k := range 4 {
				gi[k] = m.nearestGridPoint(xv[8*k:8*k+8], waux[8*k:8*k+8], id, scale)
			}
			if sumQX, sumQ2 := m.iq2Sums(xv[:], weight[:], &gi); sumQ2 > 0 {
				scale = sumQX / sumQ2
			}
		}
		if scale < 0 {
			scale = -scale
			for k := range signs {
				signs[k] = ^signs[k] & 127
			}
		}
		for k := range 4 {
			q2[2*ib] |= uint32(gi[k]) << (8 * k)
			q2[2*ib+1] |= uint32(signs[k]) << (7 * k)
		}
		scales[ib] = scale
		if !(maxScale > scale) {
			maxScale = scale
		}
	}
	clear(y)
	if maxScale == 0 {
		return // d = f16(0) and an all-zero payload
	}
	d := maxScale / 31
	binary.LittleEndian.PutUint16(y, F32ToF16(d))
	id := 1 / d // from the unrounded d, as upstream
	for ib, s := range scales {
		l := clampLevel(nearestInt(0.5*(float32(id*s)-1)), 0, 15)
		q2[2*ib+1] |= uint32(l) << 28
	}
	for i, v := range q2 {
		binary.LittleEndian.PutUint32(y[2+4*i:], v)
	}
}
