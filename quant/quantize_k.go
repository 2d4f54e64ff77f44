package quant

import "encoding/binary"

// K-quant weight quantizers (Q2_K, Q4_K) and the two scale searches they
// share, after upstream gguf-tools/quants.c. See quantize.go for why products
// are wrapped in float32().

// qkxParams selects the variant and search grid of fitAsymmetric.
type qkxParams struct {
	nmax         int32   // largest level
	rmin, rdelta float32 // the search tries iscale numerators nmax+rmin+rdelta·is
	nstep        int     // is runs over 0..nstep
	mad          bool    // absolute instead of squared error
	strictDegen  bool    // qkx2 (degenerate when max == min) instead of qkx3 (max <= min)
}

var (
	q4KRefParams      = qkxParams{nmax: 15, rmin: -1.0, rdelta: 0.1, nstep: 20, strictDegen: true}
	q4KWeightedParams = qkxParams{nmax: 15, rmin: -0.9, rdelta: 0.05, nstep: 36}
	q2KRefParams      = qkxParams{nmax: 3, rmin: -0.5, rdelta: 0.1, nstep: 15, mad: true, strictDegen: true}
	q2KWeightedParams = qkxParams{nmax: 3, rmin: -0.9, rdelta: 0.05, nstep: 36}
)

// fitAsymmetric fits x ≈ scale·L − mn with levels L in 0..p.nmax under
// weights w (upstream make_qkx2_quants / make_qkx3_quants, docs/formats/quant.md#asymmetric-scale-and-minimum-search). It
// writes the levels to L (len(x) entries, at most 32) and returns scale and
// the non-negative offset mn.
func fitAsymmetric(x, w []float32, L []uint8, p *qkxParams) (scale, mn float32) {
	n := len(x)
	w, L = w[:n], L[:n]
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	// The two upstream variants differ only here (it matters only for NaN).
	if (p.strictDegen && hi == lo) || (!p.strictDegen && hi <= lo) {
		clear(L)
		return 0, -lo
	}
	nmax := float32(p.nmax)
	iscale := nmax / (hi - lo)
	scale = 1 / iscale
	var best float32
	for i, v := range x {
		L[i] = uint8(clampLevel(nearestInt(iscale*(v-lo)), 0, p.nmax))
		best += float32(w[i] * errMetric(float32(float32(scale*float32(L[i]))+lo)-v, p.mad))
	}
	if p.nstep < 1 {
		return scale, -lo
	}
	var aux [32]uint8
	laux := aux[:n]
	for is := 0; is <= p.nstep; is++ {
		iscale := (float32(p.rmin+float32(p.rdelta*float32(is))) + nmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampLevel(nearestInt(iscale*(v-lo)), 0, p.nmax)
			laux[i] = uint8(l)
			fl := float32(l)
			wl := float32(w[i] * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * v)
		}
		d := float32(sumW*sumL2) - float32(sumL*sumL)
		if !(d > 0) {
			continue
		}
		s := (float32(sumW*sumXL) - float32(sumX*sumL)) / d
		m := (float32(sumL2*sumX) - float32(sumL*sumXL)) / d
		if m > 0 {
			m = 0
			s = sumXL / sumL2
		}
		var cur float32
		for i, v := range x {
			cur += float32(w[i] * errMetric(float32(float32(s*float32(laux[i]))+m)-v, p.mad))
		}
		if cur < best {
			copy(L, laux)
			best = cur
			scale, lo = s, m
		}
	}
	return scale, -lo
}

// errMetric is |v| for mean-absolute-deviation fits, v² otherwise.
func errMetric(v float32, mad bool) float32 {
	if mad {
		return fabsf(v)
	}
	return v * v
}

// fitSymmetric fits the non-negative values x ≈ scale·L with integer codes
// L ≤ nmax under weights qw (upstream make_qp_quants, docs/formats/quant.md#symmetric-scale-fit), writes the
// codes to L and returns scale.
//
// Upstream keeps codes in uint8 but some intermediate sums in int, so a
// negative x (the sign-flipped value of an IQ2_XXS sub-group with an odd
// count of negatives) wraps differently in the two places; this reproduces
// both exactly (golden case iq2_xxs_d1_im1 depends on it).
func fitSymmetric(x, qw []float32, L []uint8, nmax int32) float32 {
	n := len(x)
	qw, L = qw[:n], L[:n]
	var hi float32
	for _, v := range x {
		if !(hi > v) {
			hi = v
		}
	}
	if hi < 1e-15 {
		clear(L)
		return 0
	}
	iscale := float32(nmax) / hi
	for i, v := range x {
		L[i] = uint8(nearestInt(iscale * v)) // no clamp, wraps like C
	}
	scale := 1 / iscale
	var best float32
	for i, v := range x {
		diff := v - float32(scale*float32(L[i]))
		best += float32(float32(qw[i]*diff) * diff)
	}
	for is := int32(-4); is <= 4; is++ {
		if is == 0 {
			continue
		}
		iscaleIs := (float32(float32(0.1)*float32(is)) + float32(nmax)) / hi
		scaleIs := 1 / iscaleIs
		var mse float32
		for i, v := range x {
			l := min(nmax, nearestInt(iscaleIs*v))
			diff := v - float32(scaleIs*float32(l))
			mse += float32(float32(qw[i]*diff) * diff)
		}
		if mse < best {
			best = mse
			iscale = iscaleIs
		}
	}
	var sumLX, sumL2 float32
	for i, v := range x {
		l := min(nmax, nearestInt(iscale*v))
		L[i] = uint8(l)
		fl := float32(l)
		sumLX += float32(float32(qw[i]*v) * fl)
		sumL2 += float32(float32(qw[i]*fl) * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := qw[i]
			fl := float32(L[i])
			slx := sumLX - float32(float32(w*v)*fl)
			sl2 := sumL2 - float32(float32(w*fl)*fl)
			if !(slx > 0 && sl2 > 0) {
				continue
			}
			nl := min(nmax, nearestInt(v*sl2/slx))
			if nl == int32(L[i]) {
				continue
			}
			fnl := float32(nl)
			slx += float32(float32(w*v) * fnl)
			sl2 += float32(float32(w*fnl) * fnl)
			if float32(float32(slx*slx)*sumL2) > float32(float32(sumLX*sumLX)*sl2) {
				L[i] = uint8(nl)
				sumLX, sumL2 = slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	if sumL2 > 0 {
		return sumLX / sumL2
	}
	return 0
}

// packQ4KScales packs eight 6-bit scale codes and eight 6-bit min codes into
// the 12 scale bytes of a Q4_K block (docs/formats/quant.md#q4_k). Codes above 63 (only from
// wrapped negative fits) are packed with upstream's exact bit overflow.
func packQ4KScales(s []byte, ls, lm *[8]uint8) {
	s = s[:12]
	clear(s)
	for j := range 8 {
		if j < 4 {
			s[j] = ls[j]
			s[j+4] = lm[j]
		} else {
			s[j+4] = ls[j]&0x0f | lm[j]&0x0f<<4
			s[j-4] |= ls[j] >> 4 << 6
			s[j] |= lm[j] >> 4 << 6
		}
	}
}

// finishQ4K stores d and dmin and recomputes every level from the stored
// (rounded) scales, then packs the nibbles (docs/formats/quant.md#q4_k-final-codes). A sub-block whose
// effective scale is zero keeps the levels of the scale search, as upstream.
func finishQ4K(x []float32, y []byte, hd, hmin uint16, L *[QK_K]uint8) {
	binary.LittleEndian.PutUint16(y[0:], hd)
	binary.LittleEndian.PutUint16(y[2:], hmin)
	d, dmin := F16ToF32(hd), F16ToF32(hmin)
	for j := range 8 {
		sc, m := q4KScaleMin(y[4:16], j)
		dd := float32(d * float32(sc))
		if dd == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for i := 32 * j; i < 32*j+32; i++ {
			L[i] = uint8(clampLevel(nearestInt((x[i]+dm)/dd), 0, 15))
		}
	}
	qs := y[16:144]
	for p := range 4 {
		for l := range 32 {
			qs[32*p+l] = L[64*p+l] | L[64*p+32+l]<<4
		}
	}
}

// quantizeQ4_KRef writes one Q4_K block without importance (docs/formats/quant.md#q4_k-without-importance).
func quantizeQ4_KRef(x []float32, y []byte) {
	x = x[:QK_K]
	y = y[:144]
	var (
		L              [QK_K]uint8
		w              [32]float32
		scales, mins   [8]float32
		maxScale, maxM float32
	)
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		av := sqrtf(sumX2 / 32)
		for l, v := range xs {
			w[l] = av + fabsf(v)
		}
		scales[j], mins[j] = fitAsymmetric(xs, w[:], L[32*j:32*j+32], &q4KRefParams)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxM {
			maxM = mins[j]
		}
	}
	var invS, invM float32
	if maxScale > 0 {
		invS = 63 / maxScale
	}
	if maxM > 0 {
		invM = 63 / maxM
	}
	var ls, lm [8]uint8
	for j := range 8 {
		// Upstream stores the rounded code in a uint8 before the min(63):
		// keep the wrap for (never seen) negative scales.
		ls[j] = min(63, uint8(nearestInt(invS*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invM*mins[j])))
	}
	packQ4KScales(y[4:16], &ls, &lm)
	finishQ4K(x, y, F32ToF16(maxScale/63), F32ToF16(maxM/63), &L)
}

// quantizeQ4_KWeighted writes one Q4_K block using the importance qw of its
// 256 columns (docs/formats/quant.md#q4_k-with-importance).
func quantizeQ4_KWeighted(x, qw []float32, y []byte) {
	x = x[:QK_K]
	qw = qw[:QK_K]
	y = y[:144]
	var (
		L                [QK_K]uint8
		w                [32]float32
		sw, scales, mins [8]float32
		ls, lm           [8]uint8
	)
	var sumX2 float32
	for _, v := range x {
		sumX2 += float32(v * v)
	}
	// Twice the mean square (Q2_K uses the plain mean). The conversion
	// keeps the compiler from turning /256 into *(1/256) and fusing it into
	// sigma2 + x² below, which differs when sigma2 is subnormal.
	sigma2 := float32(2 * sumX2 / QK_K)
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumW float32
		for l, v := range xs {
			w[l] = float32(qw[32*j+l] * sqrtf(sigma2+float32(v*v)))
			sumW += w[l]
		}
		sw[j] = sumW
		scales[j], mins[j] = fitAsymmetric(xs, w[:], L[32*j:32*j+32], &q4KWeightedParams)
	}
	dBlock := fitSymmetric(scales[:], sw[:], ls[:], 63)
	mBlock := fitSymmetric(mins[:], sw[:], lm[:], 63)
	packQ4KScales(y[4:16], &ls, &lm)
	finishQ4K(x, y, F32ToF16(dBlock), F32ToF16(mBlock), &L)
}

// finishQ2K stores d and dmin after the 16 scale bytes already in y,
// recomputes every level from the stored scales and packs the 2-bit codes
// (docs/formats/quant.md#q2_k-final-codes). Groups with a zero effective scale keep their search levels.
func finishQ2K(x []float32, y []byte, hd, hmin uint16, L *[QK_K]uint8) {
	binary.LittleEndian.PutUint16(y[80:], hd)
	binary.LittleEndian.PutUint16(y[82:], hmin)
	d, dmin := F16ToF32(hd), F16ToF32(hmin)
	for j := range 16 {
		dl := float32(d * float32(y[j]&0x0f))
		if dl == 0 {
			continue
		}
		ml := float32(dmin * float32(y[j]>>4))
		for i := 16 * j; i < 16*j+16; i++ {
			L[i] = uint8(clampLevel(nearestInt((x[i]+ml)/dl), 0, 3))
		}
	}
	qs := y[16:80]
	for h := range 2 {
		for l := range 32 {
			e := 128*h + l
			qs[32*h+l] = L[e] | L[e+32]<<2 | L[e+64]<<4 | L[e+96]<<6
		}
	}
}

// quantizeQ2_KRef writes one Q2_K block without importance (docs/formats/quant.md#q2_k-without-importance).
func quantizeQ2_KRef(x []float32, y []byte) {
	x = x[:QK_K]
	y = y[:84]
	var (
		L              [QK_K]uint8
		w              [16]float32
		scales, mins   [16]float32
		maxScale, maxM float32
	)
	for j := range 16 {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			w[l] = fabsf(v)
		}
		scales[j], mins[j] = fitAsymmetric(xs, w[:], L[16*j:16*j+16], &q2KRefParams)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxM {
			maxM = mins[j]
		}
	}
	sc := y[:16]
	clear(sc)
	hd, hmin := F32ToF16(0), F32ToF16(0)
	if maxScale > 0 {
		is := 15 / maxScale
		for j := range sc {
			sc[j] = uint8(nearestInt(is * scales[j]))
		}
		hd = F32ToF16(maxScale / 15)
	}
	if maxM > 0 {
		is := 15 / maxM
		for j := range sc {
			// Upstream ORs the shifted int into the byte: truncate the same.
			sc[j] |= uint8(nearestInt(is*mins[j]) << 4)
		}
		hmin = F32ToF16(maxM / 15)
	}
	finishQ2K(x, y, hd, hmin, &L)
}

// quantizeQ2_KWeighted writes one Q2_K block using the importance qw of its
// 256 columns (docs/formats/quant.md#q2_k-with-importance).
func quantizeQ2_KWeighted(x, qw []float32, y []byte) {
	x = x[:QK_K]
	qw = qw[:QK_K]
	y = y[:84]
	var (
		L                [QK_K]uint8
		w                [16]float32
		sw, scales, mins [16]float32
		ls, lm           [16]uint8
	)
	var sumX2 float32
	for _, v := range x {
		sumX2 += float32(v * v)
	}
	sigma2 := float32(sumX2 / QK_K) // float32(): see quantizeQ4_KWeighted
	for j := range 16 {
		xs := x[16*j : 16*j+16]
		var sumW float32
		for l, v := range xs {
			w[l] = float32(qw[16*j+l] * sqrtf(sigma2+float32(v*v)))
			sumW += w[l]
		}
		sw[j] = sumW
		scales[j], mins[j] = fitAsymmetric(xs, w[:], L[16*j:16*j+16], &q2KWeightedParams)
	}
	dm := fitSymmetric(scales[:], sw[:], ls[:], 15)
	mm := fitSymmetric(mins[:], sw[:], lm[:], 15)
	for j := range 16 {
		y[j] = ls[j] | lm[j]<<4
	}
	finishQ2K(x, y, F32ToF16(dm), F32ToF16(mm), &L)
}
