package harness

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

// DecodeRound is one round of MeasureDecodeRounds: the all-threads read
// bandwidth probed just before it and the decode rate of its steps.
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
// runs rounds rounds: a probe of the all-threads read bandwidth that lasts
// at least cfg.MinTime, speedWarmup untimed decode steps and steps timed
// ones; tick, when not nil, is called after each step.
//
// The bandwidth of a shared machine drifts by tens of percent within
// minutes, and a probe and the steps that follow it see the same
// neighbours: each round's fraction of the speed of light is taken
// against the bandwidth of its own moment.
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
	out := make([]DecodeRound, rounds)
	for i := range out {
		bytes, el := readProbe(buf, cfg.Threads, cfg.MinTime)
		out[i].ReadGBs = bytes / el.Seconds() / 1e9
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
		out[i].DecodeTPS = float64(steps) / time.Since(start).Seconds()
	}
	return out, nil
}

// RoundFractions returns the median, least and greatest of the rounds'
// fractions of the speed of light for steps that read bytes of weights.
func RoundFractions(rounds []DecodeRound, bytes int64) (median, lo, hi float64) {
	if len(rounds) == 0 {
		return 0, 0, 0
	}
	f := make([]float64, len(rounds))
	for i, r := range rounds {
		f[i] = r.Fraction(bytes)
	}
	slices.Sort(f)
	n := len(f)
	median = f[n/2]
	if n%2 == 0 {
		median = (f[n/2-1] + f[n/2]) / 2
	}
	return median, f[0], f[n-1]
}

// probeBuffer returns the read probe's buffer of cfg.BufferBytes with every
// page written: untouched pages all map the kernel's zero page, and
// reading them would measure the cache.
func probeBuffer(cfg MachineConfig) []byte {
	buf := make([]byte, cfg.BufferBytes/cpu.ReadSumAlign*cpu.ReadSumAlign)
	parallelRange(cfg.Threads, len(buf), func(lo, hi int) {
		for i := lo; i < hi; i += 64 {
			buf[i] = byte(i >> 6)
		}
	})
	return buf
}
