package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
)

// A slice of DeepSeek V4 Flash (ds4-quant synth --preset flash --layers N)
// has the real model's shapes and types but fewer layers, so its speed
// says what the real model's would be once the layers' share is scaled:
// Extrapolate does that from two slices that differ only in layer count.

// SliceSpeed is one slice's decode traffic (DecodeTraffic) and measured
// speed, an input of Extrapolate.
type SliceSpeed struct {
	Parts []Traffic
	Speed Speed
}

// Extrapolation is a projection of decode and prefill speed, and of their
// fractions of the speed of light and of the compute limits, to a model of
// more layers.
type Extrapolation struct {
	ProjectedLayers     int64   `parquet:"projected_layers"` // the projected model's layer count
	SmallLayers         int64   `parquet:"small_layers"`
	LargeLayers         int64   `parquet:"large_layers"`
	SmallBytes          int64   `parquet:"small_bytes"` // decode weight bytes per token of the smaller slice
	LargeBytes          int64   `parquet:"large_bytes"`
	SmallDecodeTPS      float64 `parquet:"small_decode_tps"`
	LargeDecodeTPS      float64 `parquet:"large_decode_tps"`
	SmallPrefillTPS     float64 `parquet:"small_prefill_tps"`
	LargePrefillTPS     float64 `parquet:"large_prefill_tps"`
	DecodeMsPerLayer    float64 `parquet:"decode_ms_per_layer"`  // a decode step's time per layer the larger slice adds
	PrefillMsPerLayer   float64 `parquet:"prefill_ms_per_layer"` // a prompt token's prefill time per layer the larger slice adds
	Bytes               int64   `parquet:"bytes"`                // decode weight bytes per token of the projected model
	DecodeTPS           float64 `parquet:"decode_tps"`
	DecodeLimitTPS      float64 `parquet:"decode_limit_tps"` // the projected model's speed of light (DecodeLimit)
	DecodeFraction      float64 `parquet:"decode_fraction"`
	PrefillTokens       int64   `parquet:"prefill_tokens"`
	PrefillMACsInt8     int64   `parquet:"prefill_macs_int8"` // PrefillWork's of the projected model
	PrefillMACsQ8_0     int64   `parquet:"prefill_macs_q8_0"`
	PrefillMACsFloat    int64   `parquet:"prefill_macs_float"`
	PrefillTPS          float64 `parquet:"prefill_tps"`
	PrefillLimitTPS     float64 `parquet:"prefill_limit_tps"`
	PrefillLimitMixTPS  float64 `parquet:"prefill_limit_mix_tps"`  // PrefillLimitMix
	PrefillLimitVNNITPS float64 `parquet:"prefill_limit_vnni_tps"` // PrefillLimitVNNI; 0 without VNNI
	PrefillFraction     float64 `parquet:"prefill_fraction"`
	PrefillFractionMix  float64 `parquet:"prefill_fraction_mix"`
	PrefillFractionVNNI float64 `parquet:"prefill_fraction_vnni"`
	// 95% confidence intervals of the mean of the fractions projected
	// from each pair of runs (PairIntervals); 0 for fewer than two pairs.
	DecodeFractionCILo      float64 `parquet:"decode_fraction_ci_lo"`
	DecodeFractionCIHi      float64 `parquet:"decode_fraction_ci_hi"`
	PrefillFractionCILo     float64 `parquet:"prefill_fraction_ci_lo"`
	PrefillFractionCIHi     float64 `parquet:"prefill_fraction_ci_hi"`
	PrefillFractionMixCILo  float64 `parquet:"prefill_fraction_mix_ci_lo"`
	PrefillFractionMixCIHi  float64 `parquet:"prefill_fraction_mix_ci_hi"`
	PrefillFractionVNNICILo float64 `parquet:"prefill_fraction_vnni_ci_lo"`
	PrefillFractionVNNICIHi float64 `parquet:"prefill_fraction_vnni_ci_hi"`
}

// ExtrapolateTable is the directory of extrapolation runs under a results
// root.
const ExtrapolateTable = "roofline_extrapolate"

// ExtrapolateRecord is the one row of an extrapolation run's Parquet file.
type ExtrapolateRecord struct {
	RunMeta
	Machine
	Extrapolation
}

// Extrapolate projects the speed of two slices of one model, small and
// large (more layers, the same shapes and types in the layers they share),
// to a model whose layers have the compression ratios ratios. A token's
// decode and prefill times are taken to grow linearly with the layer
// count, each layer past the larger slice's costing what the larger
// slice's extra layers cost on average; the bytes and multiply-adds of the
// projected model are counted exactly from its ratios (ProjectTraffic).
// The limits and fractions are taken at the machine mc, as the roofline's.
func Extrapolate(small, large SliceSpeed, ratios []int, mc Machine) (Extrapolation, error) {
	ns, nl, n := len(small.Parts)-3, len(large.Parts)-3, len(ratios)
	switch {
	case ns < 1 || nl < 1:
		return Extrapolation{}, errors.New("harness: extrapolate: a slice's traffic needs its embedding, layers, head and total")
	case ns >= nl:
		return Extrapolation{}, fmt.Errorf("harness: extrapolate: the larger slice has %d layers, not more than the smaller one's %d", nl, ns)
	case n < nl:
		return Extrapolation{}, fmt.Errorf("harness: extrapolate: %d layers to project to, fewer than the larger slice's %d", n, nl)
	case small.Speed.DecodeTPS <= 0 || large.Speed.DecodeTPS <= 0 || small.Speed.PrefillTPS <= 0 || large.Speed.PrefillTPS <= 0:
		return Extrapolation{}, errors.New("harness: extrapolate: both slices' decode and prefill speeds must be measured")
	case small.Speed.PrefillTokens != large.Speed.PrefillTokens:
		return Extrapolation{}, fmt.Errorf("harness: extrapolate: the slices prefilled %d and %d tokens; the times per token compare only at one prompt length",
			small.Speed.PrefillTokens, large.Speed.PrefillTokens)
	}
	if err := sameLayers(small.Parts, large.Parts); err != nil {
		return Extrapolation{}, err
	}
	proj, err := ProjectTraffic(large.Parts, ratios)
	if err != nil {
		return Extrapolation{}, err
	}
	added, more := float64(nl-ns), float64(n-nl)
	// perLayer is the time per token the larger slice's extra layers add,
	// one by one; project is the n-layer model's rate.
	perLayer := func(small, large float64) float64 { return (1/large - 1/small) / added }
	project := func(large, per float64) float64 { return projectRate(large, per, more) }
	decPer := perLayer(small.Speed.DecodeTPS, large.Speed.DecodeTPS)
	prePer := perLayer(small.Speed.PrefillTPS, large.Speed.PrefillTPS)
	if decPer <= 0 || prePer <= 0 {
		return Extrapolation{}, fmt.Errorf("harness: extrapolate: the %d-layer slice ran no slower than the %d-layer one "+
			"(decode %.4g against %.4g tok/s, prefill %.4g against %.4g): the noise of the measurement swamps its layers' cost; measure more pairs",
			nl, ns, large.Speed.DecodeTPS, small.Speed.DecodeTPS, large.Speed.PrefillTPS, small.Speed.PrefillTPS)
	}
	total := proj[len(proj)-1]
	work := PrefillWork(proj, small.Speed.PrefillTokens)
	e := Extrapolation{
		ProjectedLayers: int64(n), SmallLayers: int64(ns), LargeLayers: int64(nl),
		SmallBytes: small.Parts[len(small.Parts)-1].Bytes, LargeBytes: large.Parts[len(large.Parts)-1].Bytes,
		SmallDecodeTPS: small.Speed.DecodeTPS, LargeDecodeTPS: large.Speed.DecodeTPS,
		SmallPrefillTPS: small.Speed.PrefillTPS, LargePrefillTPS: large.Speed.PrefillTPS,
		DecodeMsPerLayer: 1e3 * decPer, PrefillMsPerLayer: 1e3 * prePer,
		Bytes:           total.Bytes,
		DecodeTPS:       project(large.Speed.DecodeTPS, decPer),
		DecodeLimitTPS:  DecodeLimit(mc, total),
		PrefillTokens:   small.Speed.PrefillTokens,
		PrefillTPS:      project(large.Speed.PrefillTPS, prePer),
		PrefillMACsInt8: work.MACsInt8, PrefillMACsQ8_0: work.MACsQ8_0, PrefillMACsFloat: work.MACsFloat,
		PrefillLimitTPS: PrefillLimit(mc, work), PrefillLimitMixTPS: PrefillLimitMix(mc, work), PrefillLimitVNNITPS: PrefillLimitVNNI(mc, work),
	}
	frac := func(v, limit float64) float64 {
		if limit > 0 {
			return v / limit
		}
		return 0
	}
	e.DecodeFraction = frac(e.DecodeTPS, e.DecodeLimitTPS)
	e.PrefillFraction = frac(e.PrefillTPS, e.PrefillLimitTPS)
	e.PrefillFractionMix = frac(e.PrefillTPS, e.PrefillLimitMixTPS)
	e.PrefillFractionVNNI = frac(e.PrefillTPS, e.PrefillLimitVNNITPS)
	return e, nil
}

// projectRate returns the rate of a model of more layers than a slice
// that runs at rate large, each layer adding per seconds a token.
func projectRate(large, per, more float64) float64 { return 1 / (1/large + more*per) }

// PairIntervals sets e's confidence intervals from the runs its medians
// came from: pair i (small[i] and large[i], measured back to back) is
// projected as Extrapolate projects the medians, to fractions of e's
// limits, and each interval is the 95% Student's t interval of the mean
// of the pairs' fractions (meanCI). A pair whose larger slice ran no
// slower counts as it projects, so that noise widens the interval rather
// than vanishing from it. Fewer than two pairs leave the intervals 0.
func (e *Extrapolation) PairIntervals(small, large []Speed) {
	n := min(len(small), len(large))
	added, more := float64(e.LargeLayers-e.SmallLayers), float64(e.ProjectedLayers-e.LargeLayers)
	if n < 2 || added <= 0 {
		return
	}
	dec, pre, mix, vnni := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	frac := func(v, limit float64) float64 {
		if limit > 0 {
			return v / limit
		}
		return 0
	}
	for i := range n {
		s, l := small[i], large[i]
		d := projectRate(l.DecodeTPS, (1/l.DecodeTPS-1/s.DecodeTPS)/added, more)
		p := projectRate(l.PrefillTPS, (1/l.PrefillTPS-1/s.PrefillTPS)/added, more)
		dec[i] = frac(d, e.DecodeLimitTPS)
		pre[i], mix[i], vnni[i] = frac(p, e.PrefillLimitTPS), frac(p, e.PrefillLimitMixTPS), frac(p, e.PrefillLimitVNNITPS)
	}
	_, e.DecodeFractionCILo, e.DecodeFractionCIHi = meanCI(dec)
	_, e.PrefillFractionCILo, e.PrefillFractionCIHi = meanCI(pre)
	_, e.PrefillFractionMixCILo, e.PrefillFractionMixCIHi = meanCI(mix)
	_, e.PrefillFractionVNNICILo, e.PrefillFractionVNNICIHi = meanCI(vnni)
}

// sameLayers returns an error unless the smaller slice's embedding, head
// and layers are the larger one's first, byte for byte and multiply-add
// for multiply-add.
func sameLayers(small, large []Traffic) error {
	ns := len(small) - 3
	same := func(a, b Traffic) bool {
		return a.Ratio == b.Ratio && a.DenseBytes == b.DenseBytes && a.ExpertBytes == b.ExpertBytes && a.IndexerBytes == b.IndexerBytes &&
			a.MACsInt8 == b.MACsInt8 && a.MACsQ8_0 == b.MACsQ8_0 && a.MACsFloat == b.MACsFloat
	}
	if !same(small[0], large[0]) || !same(small[ns+1], large[len(large)-2]) {
		return errors.New("harness: extrapolate: the slices' embeddings or output heads differ: they are not slices of one model")
	}
	for il := range ns {
		if !same(small[1+il], large[1+il]) {
			return fmt.Errorf("harness: extrapolate: the slices' layer %d differs (ratio %d, %d bytes against ratio %d, %d bytes): they are not slices of one model",
				il, small[1+il].Ratio, small[1+il].Bytes, large[1+il].Ratio, large[1+il].Bytes)
		}
	}
	return nil
}

// ProjectTraffic returns the decode traffic of a model of len(ratios)
// layers, layer il of compression ratio ratios[il], from parts, the traffic
// (DecodeTraffic) of a slice of it whose layers have the first of those
// ratios: the slice's embedding, layers and head, each further layer as
// the slice's last layer of its ratio, and their total. (A hash-routed
// layer reads a row of its token-to-expert table, 4 bytes an active
// expert, where a learned-routing one reads its expert biases, 4 bytes an
// expert; where the slice's last layer of a ratio is hash-routed, so are
// the layers projected from it: in the 4-layer Flash slice, whose layers
// 0..2 are, 1000 bytes less for each of the ~200 MB layers of ratio 4.)
func ProjectTraffic(parts []Traffic, ratios []int) ([]Traffic, error) {
	nl := len(parts) - 3
	if nl < 1 || parts[0].Part != "embd" || parts[nl+1].Part != "head" || parts[nl+2].Part != "total" {
		return nil, errors.New("harness: extrapolate: a slice's traffic needs its embedding, layers, head and total")
	}
	if len(ratios) < nl {
		return nil, fmt.Errorf("harness: extrapolate: %d layers to project to, fewer than the slice's %d", len(ratios), nl)
	}
	layers := parts[1 : nl+1]
	for il, l := range layers {
		if int(l.Ratio) != ratios[il] {
			return nil, fmt.Errorf("harness: extrapolate: the slice's layer %d has compression ratio %d where the projected model's has %d", il, l.Ratio, ratios[il])
		}
	}
	out := make([]Traffic, 0, len(ratios)+3)
	out = append(out, parts[0])
	out = append(out, layers...)
	for il := nl; il < len(ratios); il++ {
		j := len(layers) - 1
		for j >= 0 && int(layers[j].Ratio) != ratios[il] {
			j--
		}
		if j < 0 {
			return nil, fmt.Errorf("harness: extrapolate: the slice has no layer of compression ratio %d, which the projected model's layer %d has", ratios[il], il)
		}
		l := layers[j]
		l.Layer = int64(il)
		out = append(out, l)
	}
	out = append(out, parts[nl+1])
	return append(out, sumTraffic(out)), nil
}

// MedianSpeed returns the median of each rate of runs, which share their
// token counts (the mean of the middle two where there are an even number).
func MedianSpeed(runs []Speed) Speed {
	if len(runs) == 0 {
		return Speed{}
	}
	median := func(rate func(Speed) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = rate(r)
		}
		m, _, _ := medianRange(v)
		return m
	}
	return Speed{
		PrefillTokens:   runs[0].PrefillTokens,
		DecodeTokens:    runs[0].DecodeTokens,
		PrefillTPS:      median(func(s Speed) float64 { return s.PrefillTPS }),
		PrefillFirstTPS: median(func(s Speed) float64 { return s.PrefillFirstTPS }),
		DecodeTPS:       median(func(s Speed) float64 { return s.DecodeTPS }),
	}
}

// ExtrapolateOptions configures RunExtrapolation.
type ExtrapolateOptions struct {
	Layers  int           // the layer count to project to
	Pairs   int           // alternating runs of the two slices
	Prefill int           // prompt tokens prefilled to measure prefill speed
	Decode  int           // tokens decoded to measure decode speed
	Probe   MachineConfig // the machine probes
	Lock    bool          // pin both slices' weights in memory while measuring
	Names   [2]string     // the smaller and the larger slice's names, for errors
	Step    func(string)  // when set, called with a line naming each probe as it starts
	Bar     BarFunc       // when set, the progress bar of the slices' runs
}

// ExtrapolateRun is an extrapolation run's measurements: the machine,
// each slice's runs (the smaller slice's first) and the projection from
// their medians.
type ExtrapolateRun struct {
	Machine       Machine
	Runs          [2][]Speed
	Extrapolation Extrapolation
}

// RunExtrapolation probes the machine, measures the speed of the slices
// small and large on be in opt.Pairs pairs of runs, each pair in the
// other order than the last, probes the machine again, keeping its best
// figures, and projects the slices' median speeds to opt.Layers layers
// (Extrapolate). The slices are checked against each other and the
// projected schedule before anything is measured.
func RunExtrapolation(ctx context.Context, small, large *engine.Model, be backends.Backend, opt ExtrapolateOptions) (*ExtrapolateRun, error) {
	ms := [2]*engine.Model{small, large}
	proj := large.Params
	proj.SetLayers(opt.Layers)
	var speeds [2]SliceSpeed
	for i, m := range ms {
		var err error
		if speeds[i].Parts, err = DecodeTraffic(m.File, m.Params); err != nil {
			return nil, fmt.Errorf("%s: %w", opt.Names[i], err)
		}
	}
	if _, err := ProjectTraffic(speeds[1].Parts, proj.CompressRatios); err != nil {
		return nil, err
	}
	mc, err := MeasureMachine(ctx, opt.Probe, opt.Step)
	if err != nil {
		return nil, err
	}
	if opt.Lock {
		unlock, err := lockAll(small, large)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	r := &ExtrapolateRun{}
	if r.Runs, err = measurePairs(ctx, ms, be, &opt); err != nil {
		return nil, err
	}
	if err := ReprobeRead(ctx, opt.Probe, &mc, opt.Step); err != nil {
		return nil, err
	}
	if err := ReprobeCompute(ctx, opt.Probe, &mc, opt.Step); err != nil {
		return nil, err
	}
	for i := range speeds {
		speeds[i].Speed = MedianSpeed(r.Runs[i])
	}
	r.Machine = mc
	if r.Extrapolation, err = Extrapolate(speeds[0], speeds[1], proj.CompressRatios, mc); err != nil {
		return nil, err
	}
	r.Extrapolation.PairIntervals(r.Runs[0], r.Runs[1])
	return r, nil
}

// measurePairs measures the speed of the models ms in opt.Pairs pairs of
// runs.
func measurePairs(ctx context.Context, ms [2]*engine.Model, be backends.Backend, opt *ExtrapolateOptions) ([2][]Speed, error) {
	var runs [2][]Speed
	tick, finish := opt.Bar.start("slices' prefill+decode", 2*opt.Pairs*(2*opt.Prefill+opt.Decode+speedWarmup))
	defer finish()
	for p := range opt.Pairs {
		// Each pair runs the slices in the other order than the last, so
		// that a drift of the machine's speed weighs on both alike.
		for k := range 2 {
			i := k ^ p&1
			sp, err := MeasureSpeed(ctx, ms[i], be, opt.Prefill, opt.Decode, tick)
			if err != nil {
				return runs, fmt.Errorf("%s: %w", opt.Names[i], err)
			}
			runs[i] = append(runs[i], sp)
		}
	}
	return runs, nil
}

// SpeedRange returns the least and the greatest rate of runs.
func SpeedRange(runs []Speed, rate func(Speed) float64) (lo, hi float64) {
	for i, r := range runs {
		if i == 0 {
			lo, hi = rate(r), rate(r)
			continue
		}
		lo, hi = min(lo, rate(r)), max(hi, rate(r))
	}
	return lo, hi
}

// WriteExtrapolateRun writes the run's row under root as a Parquet file
// of ExtrapolateTable and returns its path.
func WriteExtrapolateRun(root string, meta RunMeta, r *ExtrapolateRun) (string, error) {
	rec := ExtrapolateRecord{RunMeta: meta, Machine: r.Machine, Extrapolation: r.Extrapolation}
	return WriteRun(root, ExtrapolateTable, meta, []ExtrapolateRecord{rec})
}
