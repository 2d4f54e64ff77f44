package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/harness/probe"
)

// DecodeRound is one round of MeasureDecodeRounds: the all-threads read
// bandwidth probed around it and the decode rate of its steps.
type DecodeRound struct {
	ReadGBs   float64
	DecodeTPS float64
}

// Fraction returns the round's decode rate as a fraction of the speed of
// light at its own bandwidth, for decode steps that read bytes of weights.
func (r DecodeRound) Fraction(bytes int64) float64 {
	if r.ReadGBs <= 0 {
		return 0
	}
	return r.DecodeTPS * float64(bytes) / (r.ReadGBs * 1e9)
}

// MeasureDecodeRounds prefills prefill tokens in a fresh session, then
// runs rounds rounds of speedWarmup untimed decode steps and steps timed
// ones, with a probe of the all-threads read bandwidth lasting at least
// cfg.MinTime before the first round and after each; tick, when not nil,
// is called after each step. A round's bandwidth is the better of the
// probes just before and just after it.
//
// The bandwidth of a shared machine drifts by tens of percent within
// minutes, and a probe and the steps next to it see the same neighbours:
// each round's fraction of the speed of light is taken against the
// bandwidth of its own moment. Taking the better of the two probes around
// it keeps a dip that one probe saw and the steps did not from inflating
// the round's fraction.
func MeasureDecodeRounds(ctx context.Context, m *engine.Model, be backends.Backend, cfg MachineConfig, prefill, steps, rounds int, tick func(n int)) ([]DecodeRound, error) {
	if prefill <= 0 || steps <= 0 || rounds <= 0 {
		return nil, errors.New("harness: decode rounds: prefill, step and round counts must be positive")
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	per := speedWarmup + steps
	s, toks, err := prefilledSession(m, be, prefill, rounds*per, "decode rounds")
	if err != nil {
		return nil, err
	}
	buf := probeBuffer(cfg)
	readGBs := func() float64 {
		bytes, el := readProbe(buf, cfg.Threads, cfg.MinTime)
		return bytes / el.Seconds() / 1e9
	}
	before := readGBs()
	out := make([]DecodeRound, rounds)
	for i := range out {
		// As in MeasureSpeed, untimed steps come first: the probe's
		// gigabyte has pushed the session's own buffers out of the caches.
		lo := prefill + i*per
		if err := decodeAll(ctx, s, toks[lo:lo+speedWarmup], tick, "decode rounds"); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := decodeAll(ctx, s, toks[lo+speedWarmup:lo+per], tick, "decode rounds"); err != nil {
			return nil, err
		}
		tps := float64(steps) / time.Since(start).Seconds()
		after := readGBs()
		out[i] = DecodeRound{ReadGBs: max(before, after), DecodeTPS: tps}
		before = after
	}
	return out, nil
}

// RoundFractions returns the median, least and greatest of the rounds'
// fractions of the speed of light for steps that read bytes of weights.
func RoundFractions(rounds []DecodeRound, bytes int64) (median, lo, hi float64) {
	return medianRange(roundFractions(rounds, bytes))
}

// RoundFractionsCI returns the bounds of the 95% confidence interval of
// the mean of the rounds' fractions of the speed of light (meanCI; 0 for
// fewer than two rounds).
func RoundFractionsCI(rounds []DecodeRound, bytes int64) (lo, hi float64) {
	_, lo, hi = meanCI(roundFractions(rounds, bytes))
	return lo, hi
}

// roundFractions returns each round's Fraction.
func roundFractions(rounds []DecodeRound, bytes int64) []float64 {
	f := make([]float64, len(rounds))
	for i, r := range rounds {
		f[i] = r.Fraction(bytes)
	}
	return f
}

// PrefillRound is one round of MeasurePrefillRounds: the all-threads int8
// dot peaks probed around it and the rate of its prefill.
type PrefillRound struct {
	Int8GopsAll float64
	Q8_0GopsAll float64
	VNNIGopsAll float64 // 0 without AVX-512 VNNI
	PrefillTPS  float64
}

// Fractions returns the round's prefill rate as fractions of work's
// compute limit, avx2 mix limit and VNNI limit (PrefillLimit,
// PrefillLimitMix, PrefillLimitVNNI) at the round's own int8 peaks and
// mc's float32 FMA peak; a limit that is 0 gives 0.
func (r PrefillRound) Fractions(mc Machine, work Traffic) (limit, mix, vnni float64) {
	mc.Int8GopsAll, mc.Q8_0GopsAll, mc.VNNIGopsAll = r.Int8GopsAll, r.Q8_0GopsAll, r.VNNIGopsAll
	frac := func(l float64) float64 {
		if l <= 0 {
			return 0
		}
		return r.PrefillTPS / l
	}
	return frac(PrefillLimit(mc, work)), frac(PrefillLimitMix(mc, work)), frac(PrefillLimitVNNI(mc, work))
}

// PrefillRoundStats summarizes prefill rounds: the median, least and
// greatest fraction of the compute limit, the medians of the avx2 mix and
// VNNI limits' fractions, the range of the int8 peaks probed, and the 95%
// confidence intervals of the mean of each of the three fractions
// (meanCI; 0 for fewer than two rounds).
type PrefillRoundStats struct {
	Fraction, FractionMin, FractionMax float64
	FractionMix, FractionVNNI          float64
	Int8GopsMin, Int8GopsMax           float64
	FractionCILo, FractionCIHi         float64
	FractionMixCILo, FractionMixCIHi   float64
	FractionVNNICILo, FractionVNNICIHi float64
}

// SummarizePrefillRounds returns the stats of rounds, each taken by
// PrefillRound.Fractions with mc and work; zeros when there are none.
func SummarizePrefillRounds(rounds []PrefillRound, mc Machine, work Traffic) PrefillRoundStats {
	var st PrefillRoundStats
	lim, mix, vnni := make([]float64, len(rounds)), make([]float64, len(rounds)), make([]float64, len(rounds))
	gops := make([]float64, len(rounds))
	for i, r := range rounds {
		lim[i], mix[i], vnni[i] = r.Fractions(mc, work)
		gops[i] = r.Int8GopsAll
	}
	_, st.FractionCILo, st.FractionCIHi = meanCI(lim)
	_, st.FractionMixCILo, st.FractionMixCIHi = meanCI(mix)
	_, st.FractionVNNICILo, st.FractionVNNICIHi = meanCI(vnni)
	st.Fraction, st.FractionMin, st.FractionMax = medianRange(lim)
	st.FractionMix, _, _ = medianRange(mix)
	st.FractionVNNI, _, _ = medianRange(vnni)
	_, st.Int8GopsMin, st.Int8GopsMax = medianRange(gops)
	return st
}

// MeasurePrefillRounds prefills prefill tokens once, untimed, in a fresh
// session (the first prefill allocates the session's scratch), then runs
// rounds timed prefills of the same tokens in the session reset, with one
// run of each all-threads int8 dot probe (at least cfg.MinTime) before the
// first and after each; tick, when not nil, is called after each prefill.
// A round's peaks are the better of the probes just before and just after
// it.
//
// A neighbour's work on a shared machine moves the arithmetic peaks by up
// to a third and prefill with them (docs/performance.md#baselines): each
// round's fractions are taken against the peaks of its own moment, as the decode rounds' are
// against their bandwidth. Taking the better of the two probes around it
// keeps a dip that one probe saw and the prefill did not from inflating
// the round's fraction.
func MeasurePrefillRounds(ctx context.Context, m *engine.Model, be backends.Backend, cfg MachineConfig, prefill, rounds int, tick func(n int)) ([]PrefillRound, error) {
	if prefill <= 0 || rounds <= 0 {
		return nil, errors.New("harness: prefill rounds: prefill and round counts must be positive")
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if tick == nil {
		tick = func(int) {}
	}
	s, toks, err := prefilledSession(m, be, prefill, 0, "prefill rounds")
	if err != nil {
		return nil, err
	}
	tick(prefill)
	one := cfg
	one.Trials = 1
	peaks := func() (Machine, error) {
		var mc Machine
		err := runProbes(ctx, one, dotProbes(one, &mc, false), nil)
		return mc, err
	}
	before, err := peaks()
	if err != nil {
		return nil, err
	}
	out := make([]PrefillRound, rounds)
	for i := range out {
		s.Reset()
		start := time.Now()
		if err := s.Prefill(toks); err != nil {
			return nil, fmt.Errorf("harness: prefill rounds: prefill: %w", err)
		}
		tps := float64(prefill) / time.Since(start).Seconds()
		tick(prefill)
		after, err := peaks()
		if err != nil {
			return nil, err
		}
		out[i] = PrefillRound{Int8GopsAll: max(before.Int8GopsAll, after.Int8GopsAll), Q8_0GopsAll: max(before.Q8_0GopsAll, after.Q8_0GopsAll),
			VNNIGopsAll: max(before.VNNIGopsAll, after.VNNIGopsAll), PrefillTPS: tps}
		before = after
	}
	return out, nil
}

// probeBuffer returns the read probe's buffer of cfg.BufferBytes with every
// page written: untouched pages all map the kernel's zero page, and
// reading them would measure the cache.
func probeBuffer(cfg MachineConfig) []byte {
	buf := make([]byte, cfg.BufferBytes/probe.ReadSumAlign*probe.ReadSumAlign)
	parallelRange(cfg.Threads, len(buf), func(lo, hi int) {
		for i := lo; i < hi; i += 64 {
			buf[i] = byte(i >> 6)
		}
	})
	return buf
}
