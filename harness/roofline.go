package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/expertcache"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/harness/probe"
	"github.com/ds4-go/ds4/quant"
)

// MachineConfig sets how MeasureMachine probes the machine.
type MachineConfig struct {
	BufferBytes int64         // bytes streamed by the bandwidth probe; 0 means 1 GiB
	Threads     int           // goroutines of the all-threads probes; 0 means GOMAXPROCS
	MinTime     time.Duration // shortest timed run of each probe; 0 means 1 s
	Trials      int           // timed runs per probe, the best one kept; 0 means 3
}

// Machine is the measured limits of this machine: sustained memory-read
// bandwidth and the peak throughput of the dot kernels' instruction mixes,
// with one goroutine and with all of them.
type Machine struct {
	ProbeThreads int64   `parquet:"probe_threads"`
	ReadGBs1     float64 `parquet:"read_gbs_1"`   // GB/s (1e9 bytes) read by one goroutine
	ReadGBsAll   float64 `parquet:"read_gbs_all"` // GB/s read by ProbeThreads goroutines
	FMAGflops1   float64 `parquet:"fma_gflops_1"` // float32 GFLOP/s (an FMA is 2) of one goroutine
	FMAGflopsAll float64 `parquet:"fma_gflops_all"`
	Int8Gops1    float64 `parquet:"int8_gops_1"` // int8 Gop/s (a multiply-add is 2) of one goroutine, AVX2 mix of the Q8_K dots
	Int8GopsAll  float64 `parquet:"int8_gops_all"`
	Q8_0Gops1    float64 `parquet:"q8_0_gops_1"` // int8 Gop/s of one goroutine, AVX2 mix of the Q8_0 dots (Int8Gops1's and a VPSIGNB)
	Q8_0GopsAll  float64 `parquet:"q8_0_gops_all"`
	VNNIGops1    float64 `parquet:"vnni_gops_1"` // int8 Gop/s of one goroutine with AVX-512 VNNI; 0 without it
	VNNIGopsAll  float64 `parquet:"vnni_gops_all"`
	BufferBytes  int64   `parquet:"buffer_bytes"`
}

func (c *MachineConfig) normalize() error {
	if c.BufferBytes == 0 {
		c.BufferBytes = 1 << 30
	}
	if c.Threads == 0 {
		c.Threads = runtime.GOMAXPROCS(0)
	}
	if c.MinTime == 0 {
		c.MinTime = time.Second
	}
	if c.Trials == 0 {
		c.Trials = 3
	}
	if c.BufferBytes < int64(probe.ReadSumAlign)*int64(c.Threads) || c.Threads < 0 || c.MinTime < 0 || c.Trials < 0 {
		return fmt.Errorf("harness: roofline: bad probe settings %+v", *c)
	}
	return nil
}

// MeasureMachine runs the bandwidth and compute probes; step, when not
// nil, is told the name of each probe as it starts.
func MeasureMachine(ctx context.Context, cfg MachineConfig, step func(string)) (Machine, error) {
	if err := cfg.normalize(); err != nil {
		return Machine{}, err
	}
	mc := Machine{ProbeThreads: int64(cfg.Threads), BufferBytes: cfg.BufferBytes}
	if err := probeRead(ctx, cfg, &mc, step); err != nil {
		return mc, err
	}
	return mc, runProbes(ctx, cfg, computeProbes(cfg, &mc), step)
}

// computeProbes returns the probes of the arithmetic peaks, which raise
// mc's figures.
func computeProbes(cfg MachineConfig, mc *Machine) []machineProbe {
	fma := func(threads int) (float64, time.Duration) {
		return loopProbe(threads, cfg.MinTime, probe.FMAFlopsPerIter, func(n int) { runtime.KeepAlive(probe.FMALoop(n)) })
	}
	return append([]machineProbe{
		{"float32 FMA, 1 thread", &mc.FMAGflops1, 1, fma},
		{fmt.Sprintf("float32 FMA, %d threads", cfg.Threads), &mc.FMAGflopsAll, cfg.Threads, fma},
	}, dotProbes(cfg, mc, true)...)
}

// dotProbe is one int8 dot kind of dotProbes: its loop, its operations
// per iteration and the figures it raises.
type dotProbe struct {
	name     string
	one, all *float64
	perIter  int
	loop     func(n int) int32
}

// dotProbes returns the probes of the int8 dot peaks, which raise mc's
// figures: the AVX2 int8 and Q8_0 mixes and, where the CPU has it, the
// AVX-512 VNNI dot, each with all threads, after one thread when single
// is set.
func dotProbes(cfg MachineConfig, mc *Machine, single bool) []machineProbe {
	kinds := []dotProbe{
		{"int8 dot", &mc.Int8Gops1, &mc.Int8GopsAll, probe.DotI8OpsPerIter, probe.DotI8Loop},
		{"int8 Q8_0 dot", &mc.Q8_0Gops1, &mc.Q8_0GopsAll, probe.DotQ8_0OpsPerIter, probe.DotQ8_0Loop},
	}
	if probe.HasVNNI() {
		kinds = append(kinds, dotProbe{"int8 VNNI dot", &mc.VNNIGops1, &mc.VNNIGopsAll, probe.DotVNNIOpsPerIter, probe.DotVNNILoop})
	}
	var probes []machineProbe
	for _, k := range kinds {
		run := func(threads int) (float64, time.Duration) {
			return loopProbe(threads, cfg.MinTime, k.perIter, func(n int) { runtime.KeepAlive(k.loop(n)) })
		}
		if single {
			probes = append(probes, machineProbe{k.name + ", 1 thread", k.one, 1, run})
		}
		probes = append(probes, machineProbe{fmt.Sprintf("%s, %d threads", k.name, cfg.Threads), k.all, cfg.Threads, run})
	}
	return probes
}

// ReprobeRead measures the read bandwidth again, as MeasureMachine does,
// and raises mc's figures to the new ones where those are higher. This
// machine's bandwidth drifts by tens of percent within minutes, and a
// speed of light taken in a dip would overstate the fraction of it that
// a model reaches: probing before and after the model runs and keeping
// the best keeps the fraction conservative.
func ReprobeRead(ctx context.Context, cfg MachineConfig, mc *Machine, step func(string)) error {
	if err := cfg.normalize(); err != nil {
		return err
	}
	return probeRead(ctx, cfg, mc, step)
}

// ReprobeCompute measures the arithmetic peaks again, as MeasureMachine
// does, and raises mc's figures to the new ones where those are higher.
// On a shared machine a neighbour's work can take a third off a probe's
// reading, and a peak taken in such a dip would overstate the fraction of
// it that prefill reaches.
func ReprobeCompute(ctx context.Context, cfg MachineConfig, mc *Machine, step func(string)) error {
	if err := cfg.normalize(); err != nil {
		return err
	}
	return runProbes(ctx, cfg, computeProbes(cfg, mc), step)
}

// machineProbe is one of MeasureMachine's measurements: run returns the units
// of work done and the time taken, whose best rate over the trials goes
// to out in G units per second.
type machineProbe struct {
	name    string
	out     *float64
	threads int
	run     func(threads int) (units float64, elapsed time.Duration)
}

// runProbes runs each probe cfg.Trials times, telling step (when not nil)
// each probe's name.
func runProbes(ctx context.Context, cfg MachineConfig, probes []machineProbe, step func(string)) error {
	for _, p := range probes {
		if step != nil {
			step(p.name)
		}
		for range cfg.Trials {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("harness: roofline: %w", err)
			}
			units, el := p.run(p.threads)
			*p.out = max(*p.out, units/el.Seconds()/1e9)
		}
	}
	return nil
}

// probeRead measures the read bandwidth with one thread and with all,
// raising mc's figures where the new ones are higher.
func probeRead(ctx context.Context, cfg MachineConfig, mc *Machine, step func(string)) error {
	buf := probeBuffer(cfg)
	read := func(threads int) (float64, time.Duration) {
		return readProbe(buf, threads, cfg.MinTime)
	}
	return runProbes(ctx, cfg, []machineProbe{
		{"read bandwidth, 1 thread", &mc.ReadGBs1, 1, read},
		{fmt.Sprintf("read bandwidth, %d threads", cfg.Threads), &mc.ReadGBsAll, cfg.Threads, read},
	}, step)
}

// readProbe streams buf split over threads goroutines, enough passes to
// last at least minTime, and returns the bytes read and the time taken.
func readProbe(buf []byte, threads int, minTime time.Duration) (float64, time.Duration) {
	pass := func(passes int) time.Duration {
		start := time.Now()
		parallelRange(threads, len(buf)/probe.ReadSumAlign, func(lo, hi int) {
			part := buf[lo*probe.ReadSumAlign : hi*probe.ReadSumAlign]
			var s uint64
			for range passes {
				s += probe.ReadSum(part)
			}
			runtime.KeepAlive(s)
		})
		return time.Since(start)
	}
	one := pass(1)
	passes := max(1, int(minTime/max(one, time.Microsecond)))
	return float64(passes) * float64(len(buf)), pass(passes)
}

// loopProbe runs loop on threads goroutines with an iteration count
// sized to last at least minTime and returns the operations done (perIter
// per iteration) and the time taken.
func loopProbe(threads int, minTime time.Duration, perIter int, loop func(n int)) (float64, time.Duration) {
	n := 1 << 16
	for {
		start := time.Now()
		loop(n)
		if el := time.Since(start); el > minTime/20 || n > 1<<40 {
			n = max(n, int(float64(n)*minTime.Seconds()/el.Seconds()))
			break
		}
		n *= 4
	}
	start := time.Now()
	parallelRange(threads, threads, func(int, int) { loop(n) })
	return float64(n) * float64(perIter) * float64(threads), time.Since(start)
}

// parallelRange splits [0, n) into threads contiguous parts, runs f on
// each in its own goroutine and waits.
func parallelRange(threads, n int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(t*n/threads, (t+1)*n/threads)
		}()
	}
	wg.Wait()
}

// Traffic is what one decode step reads from the weights of one part of a
// model (the embedding row, a layer, or the output head), at a context
// short enough that the indexer's query projections are not needed.
type Traffic struct {
	Part         string `parquet:"part"`  // "embd", "layer", "head" or "total"
	Layer        int64  `parquet:"layer"` // layer index, -1 for other parts
	Ratio        int64  `parquet:"ratio"` // the layer's compression ratio
	DenseBytes   int64  `parquet:"dense_bytes"`
	ExpertBytes  int64  `parquet:"expert_bytes"`  // ExpertsUsed routed experts
	IndexerBytes int64  `parquet:"indexer_bytes"` // indexer query weights, read only past 4·IndexerTopK tokens (not in Bytes)
	Bytes        int64  `parquet:"bytes"`         // DenseBytes + ExpertBytes
	MACsInt8     int64  `parquet:"macs_int8"`     // multiply-adds against int8-quantized activations
	MACsQ8_0     int64  `parquet:"macs_q8_0"`     // those of MACsInt8 with Q8_0 weights (and Q8_0 activations)
	MACsFloat    int64  `parquet:"macs_float"`    // multiply-adds against float32 activations
}

// DecodeTraffic returns the weight traffic of one decode step of the DS4
// model in f (shape p): one embedding row, each layer's tensors with
// ExpertsUsed of its routed experts, and the output head, then their total.
// Vectors, lookup tables (one row) and matrices are counted from the
// file's tensor table, so the numbers hold for any recipe.
func DecodeTraffic(f *gguf.File, p layout.Params) ([]Traffic, error) {
	parts, _, err := decodeTraffic(f, p)
	return parts, err
}

// DecodeBytesByType returns the bytes of one decode step's traffic
// (DecodeTraffic's total) per weight type.
func DecodeBytesByType(f *gguf.File, p layout.Params) (map[quant.Type]int64, error) {
	_, byType, err := decodeTraffic(f, p)
	return byType, err
}

// decodeTraffic is DecodeTraffic with the bytes also summed per type.
func decodeTraffic(f *gguf.File, p layout.Params) ([]Traffic, map[quant.Type]int64, error) {
	byType := map[quant.Type]int64{}
	parts := make([]Traffic, 0, p.Layers+3)
	parts = append(parts, Traffic{Part: "embd", Layer: -1})
	for il := range p.Layers {
		parts = append(parts, Traffic{Part: "layer", Layer: int64(il), Ratio: int64(p.Ratio(il))})
	}
	parts = append(parts, Traffic{Part: "head", Layer: -1})
	for _, t := range f.Tensors {
		var tr *Traffic
		name := t.Name
		switch {
		case name == "token_embd.weight":
			tr = &parts[0]
		case strings.HasPrefix(name, "output"):
			tr = &parts[len(parts)-1]
		case strings.HasPrefix(name, "blk."):
			var il int
			if _, err := fmt.Sscanf(name, "blk.%d.", &il); err != nil || il < 0 || il >= p.Layers {
				return nil, nil, fmt.Errorf("harness: roofline: tensor %q: no such layer", name)
			}
			tr = &parts[1+il]
		default:
			return nil, nil, fmt.Errorf("harness: roofline: tensor %q: unknown part", name)
		}
		size, macs := int64(t.Size), int64(t.Elements())
		if len(t.Dims) < 2 {
			macs = 0
		}
		switch {
		case strings.HasSuffix(name, "_exps.weight"):
			if len(t.Dims) != 3 || t.Dims[2] == 0 {
				return nil, nil, fmt.Errorf("harness: roofline: tensor %q: expert stack of shape %v", name, t.Dims)
			}
			e := int64(t.Dims[2])
			tr.ExpertBytes += size / e * int64(p.ExpertsUsed)
			byType[t.Type] += size / e * int64(p.ExpertsUsed)
			tr.MACsInt8 += macs / e * int64(p.ExpertsUsed)
			continue
		case strings.Contains(name, "indexer.attn_q_b.") || strings.Contains(name, "indexer.proj."):
			tr.IndexerBytes += size
			continue
		case name == "token_embd.weight" || strings.Contains(name, "tid2eid") || strings.Contains(name, "_ape."):
			// Lookup tables: one row per token.
			if len(t.Dims) != 2 || t.Dims[1] == 0 {
				return nil, nil, fmt.Errorf("harness: roofline: tensor %q: table of shape %v", name, t.Dims)
			}
			size, macs = size/int64(t.Dims[1]), 0
		}
		tr.DenseBytes += size
		byType[t.Type] += size
		if t.Type == quant.Q8_0 || t.Type == quant.Q2_K || t.Type == quant.Q4_K || t.Type == quant.IQ2_XXS {
			tr.MACsInt8 += macs
			if t.Type == quant.Q8_0 {
				tr.MACsQ8_0 += macs
			}
		} else {
			tr.MACsFloat += macs
		}
	}
	for i := range parts {
		parts[i].Bytes = parts[i].DenseBytes + parts[i].ExpertBytes
	}
	return append(parts, sumTraffic(parts)), byType, nil
}

// sumTraffic returns the total of parts.
func sumTraffic(parts []Traffic) Traffic {
	total := Traffic{Part: "total", Layer: -1}
	for _, t := range parts {
		total.DenseBytes += t.DenseBytes
		total.ExpertBytes += t.ExpertBytes
		total.IndexerBytes += t.IndexerBytes
		total.Bytes += t.Bytes
		total.MACsInt8 += t.MACsInt8
		total.MACsQ8_0 += t.MACsQ8_0
		total.MACsFloat += t.MACsFloat
	}
	return total
}

// DecodeLimit returns the decode speed of light in tokens/s: the
// all-threads read bandwidth over the bytes of one step.
func DecodeLimit(mc Machine, total Traffic) float64 {
	if total.Bytes == 0 {
		return 0
	}
	return mc.ReadGBsAll * 1e9 / float64(total.Bytes)
}

// PrefillWork returns the multiply-adds per token of an n-token prefill
// of the model whose decode traffic is parts (DecodeTraffic's result):
// every token runs the layers, but Prefill computes the output head's
// logits for the last token only, so the head counts once per prompt.
func PrefillWork(parts []Traffic, n int64) Traffic {
	w := Traffic{Part: "prefill", Layer: -1}
	for _, t := range parts {
		switch t.Part {
		case "total":
		case "head":
			if n > 0 {
				w.MACsInt8 += t.MACsInt8 / n
				w.MACsQ8_0 += t.MACsQ8_0 / n
				w.MACsFloat += t.MACsFloat / n
			}
		default:
			w.MACsInt8 += t.MACsInt8
			w.MACsQ8_0 += t.MACsQ8_0
			w.MACsFloat += t.MACsFloat
		}
	}
	return w
}

// PrefillLimit returns the compute-bound prefill limit in tokens/s: the
// multiply-adds of work (one token's, see PrefillWork) at the all-threads
// peak of their instruction mix (int8 dot for quantized weights, float32
// FMA for float ones). The int8 peak is that of the plainest Q8 dot, the
// Q8_K dots' multiply and widening adds; the AVX2 Q8_0 dots add a sign
// step (PrefillLimitMix) and the IQ2/K-quant ones unpack their weights,
// so the bound is optimistic for both.
func PrefillLimit(mc Machine, work Traffic) float64 {
	return prefillLimit(mc.Int8GopsAll, mc.FMAGflopsAll, work)
}

// PrefillLimitMix is PrefillLimit with the multiply-adds of Q8_0 weights
// at the peak of the AVX2 Q8_0 dots' mix, which moves signs besides (both
// its operands are signed), and the other int8 ones at the int8 peak: the
// bound of the avx2 kernels' instructions; 0 before the Q8_0 mix is
// probed.
func PrefillLimitMix(mc Machine, work Traffic) float64 {
	if mc.Q8_0GopsAll == 0 || mc.Int8GopsAll == 0 || mc.FMAGflopsAll == 0 {
		return 0
	}
	sec := 2*float64(work.MACsQ8_0)/(mc.Q8_0GopsAll*1e9) + 2*float64(work.MACsInt8-work.MACsQ8_0)/(mc.Int8GopsAll*1e9) +
		2*float64(work.MACsFloat)/(mc.FMAGflopsAll*1e9)
	if sec == 0 {
		return 0
	}
	return 1 / sec
}

// PrefillLimitVNNI is PrefillLimit with the int8 multiply-adds at the
// AVX-512 VNNI peak, the int8 instruction of the avx512 kernels; 0 on a
// machine without it.
func PrefillLimitVNNI(mc Machine, work Traffic) float64 {
	return prefillLimit(mc.VNNIGopsAll, mc.FMAGflopsAll, work)
}

func prefillLimit(int8Gops, fmaGflops float64, work Traffic) float64 {
	if int8Gops == 0 || fmaGflops == 0 {
		return 0
	}
	sec := 2*float64(work.MACsInt8)/(int8Gops*1e9) + 2*float64(work.MACsFloat)/(fmaGflops*1e9)
	if sec == 0 {
		return 0
	}
	return 1 / sec
}

// Speed is a measured prefill and decode rate of a model.
type Speed struct {
	PrefillTokens   int64   `parquet:"prefill_tokens"`
	PrefillTPS      float64 `parquet:"prefill_tps"`
	PrefillFirstTPS float64 `parquet:"prefill_first_tps"` // the session's first, untimed-for-the-fraction prefill
	DecodeTokens    int64   `parquet:"decode_tokens"`
	DecodeTPS       float64 `parquet:"decode_tps"`
	// Experts is the expert cache's work over the timed decode, nil when
	// the model does not stream its experts.
	Experts *expertcache.Stats `parquet:"-"`
}

// speedWarmup is the number of untimed decode steps between the prefill
// and the timed decode: the first steps of a process run measurably
// slower (cold caches and TLBs over the weights).
const speedWarmup = 4

// MeasureSpeed prefills prefill tokens of a fixed pseudo-random sequence in
// a fresh session on be twice (the second time timed, after a reset),
// decodes speedWarmup more untimed, then decode more one at a time, and
// returns both rates, with the expert cache's work over the timed decode when
// the model streams its experts; tick, when not nil, is called after each
// step.
func MeasureSpeed(ctx context.Context, m *engine.Model, be backends.Backend, prefill, decode int, tick func(n int)) (Speed, error) {
	if prefill <= 0 || decode <= 0 {
		return Speed{}, errors.New("harness: roofline: prefill and decode token counts must be positive")
	}
	s, err := engine.NewSession(m, be, engine.Options{Context: prefill + speedWarmup + decode + 1})
	if err != nil {
		return Speed{}, fmt.Errorf("harness: roofline: %w", err)
	}
	toks := speedTokens(prefill+speedWarmup+decode, m.Params.Vocab)
	if tick == nil {
		tick = func(int) {}
	}
	sp := Speed{PrefillTokens: int64(prefill), DecodeTokens: int64(decode)}
	// The first prefill of a process is slow: its routed-expert kernels
	// touch most experts' pages for the first time, and a session's first
	// prefill also allocates its scratch buffers. The second prefill, on
	// the reset session, is the steady state the fraction is taken of; the
	// first is reported beside it.
	for _, tps := range []*float64{&sp.PrefillFirstTPS, &sp.PrefillTPS} {
		s.Reset()
		start := time.Now()
		if err := s.Prefill(toks[:prefill]); err != nil {
			return sp, fmt.Errorf("harness: roofline: prefill: %w", err)
		}
		*tps = float64(prefill) / time.Since(start).Seconds()
		tick(prefill)
	}
	if err := decodeAll(ctx, s, toks[prefill:prefill+speedWarmup], tick, "roofline"); err != nil {
		return sp, err
	}
	c := m.ExpertCache()
	var st0 expertcache.Stats
	if c != nil {
		st0 = c.Stats()
	}
	start := time.Now()
	if err := decodeAll(ctx, s, toks[prefill+speedWarmup:], tick, "roofline"); err != nil {
		return sp, err
	}
	sp.DecodeTPS = float64(decode) / time.Since(start).Seconds()
	if c != nil {
		d := c.Stats().Sub(st0)
		sp.Experts = &d
	}
	return sp, nil
}

// prefilledSession returns a fresh session on be, with room for prefill
// plus decode tokens, that has prefilled the first prefill of the
// speedTokens it returns; what names the measurement in errors.
func prefilledSession(m *engine.Model, be backends.Backend, prefill, decode int, what string) (*engine.Session, []int, error) {
	s, err := engine.NewSession(m, be, engine.Options{Context: prefill + decode + 1})
	if err != nil {
		return nil, nil, fmt.Errorf("harness: %s: %w", what, err)
	}
	toks := speedTokens(prefill+decode, m.Params.Vocab)
	if err := s.Prefill(toks[:prefill]); err != nil {
		return nil, nil, fmt.Errorf("harness: %s: prefill: %w", what, err)
	}
	return s, toks, nil
}

// decodeAll decodes toks in s one at a time, calling tick, when not nil,
// after each; what names the measurement in errors.
func decodeAll(ctx context.Context, s *engine.Session, toks []int, tick func(n int), what string) error {
	for _, t := range toks {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("harness: %s: %w", what, err)
		}
		if err := s.Decode(t); err != nil {
			return fmt.Errorf("harness: %s: decode: %w", what, err)
		}
		if tick != nil {
			tick(1)
		}
	}
	return nil
}

// speedTokens returns n pseudo-random tokens below vocab, the same on
// every call, for the speed measurements.
func speedTokens(n, vocab int) []int {
	toks := make([]int, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range toks {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		toks[i] = int(x % uint64(vocab))
	}
	return toks
}

// RooflineRecord is one row of a roofline run's Parquet file: the run,
// the machine, one part's traffic, the limits and, when measured, the
// model's speed and its fractions of the limits (all but the traffic
// repeat on every row).
type RooflineRecord struct {
	RunMeta
	Machine
	Traffic
	Speed
	Disk
	SSDLimit
	DecodeLimitTPS       float64 `parquet:"decode_limit_tps"`
	PrefillMACsInt8      int64   `parquet:"prefill_macs_int8"`  // PrefillWork's, per token of the timed prefill
	PrefillMACsQ8_0      int64   `parquet:"prefill_macs_q8_0"`  // PrefillWork's, per token of the timed prefill
	PrefillMACsFloat     int64   `parquet:"prefill_macs_float"` // PrefillWork's, per token of the timed prefill
	PrefillLimitTPS      float64 `parquet:"prefill_limit_tps"`
	PrefillLimitMixTPS   float64 `parquet:"prefill_limit_mix_tps"`  // PrefillLimitMix
	PrefillLimitVNNITPS  float64 `parquet:"prefill_limit_vnni_tps"` // PrefillLimitVNNI; 0 without VNNI
	KernelLimitTPS       float64 `parquet:"kernel_limit_tps"`       // KernelLimit of the run's kernel rates; 0 when not measured
	DecodeFraction       float64 `parquet:"decode_fraction"`
	PrefillFraction      float64 `parquet:"prefill_fraction"`
	PrefillFractionMix   float64 `parquet:"prefill_fraction_mix"`
	PrefillFractionVNNI  float64 `parquet:"prefill_fraction_vnni"`
	DecodeKernelFraction float64 `parquet:"decode_kernel_fraction"` // decode rate over KernelLimitTPS
	// The decode rounds (MeasureDecodeRounds), each round's fraction of
	// the speed of light taken at the better of the bandwidths probed just
	// before and just after it; zero where none ran.
	DecodeRounds            int64   `parquet:"decode_rounds"`
	DecodeRoundFraction     float64 `parquet:"decode_round_fraction"` // the median round's
	DecodeRoundFractionMin  float64 `parquet:"decode_round_fraction_min"`
	DecodeRoundFractionMax  float64 `parquet:"decode_round_fraction_max"`
	DecodeRoundFractionCILo float64 `parquet:"decode_round_fraction_ci_lo"` // 95% interval of the rounds' mean (RoundFractionsCI); 0 for one round
	DecodeRoundFractionCIHi float64 `parquet:"decode_round_fraction_ci_hi"`
	DecodeRoundReadGBsMin   float64 `parquet:"decode_round_read_gbs_min"` // the rounds' bandwidth range
	DecodeRoundReadGBsMax   float64 `parquet:"decode_round_read_gbs_max"`
	// The prefill rounds (MeasurePrefillRounds, SummarizePrefillRounds),
	// each round's fractions taken at the better of the int8 peaks probed
	// just before and just after it; zero where none ran.
	PrefillRounds              int64   `parquet:"prefill_rounds"`
	PrefillRoundFraction       float64 `parquet:"prefill_round_fraction"` // the median round's, of the compute limit
	PrefillRoundFractionMin    float64 `parquet:"prefill_round_fraction_min"`
	PrefillRoundFractionMax    float64 `parquet:"prefill_round_fraction_max"`
	PrefillRoundFractionMix    float64 `parquet:"prefill_round_fraction_mix"`      // the median of the avx2 mix limit's
	PrefillRoundFractionVNNI   float64 `parquet:"prefill_round_fraction_vnni"`     // the median of the VNNI limit's; 0 without VNNI
	PrefillRoundInt8GopsAllMin float64 `parquet:"prefill_round_int8_gops_all_min"` // the rounds' int8 peak range
	PrefillRoundInt8GopsAllMax float64 `parquet:"prefill_round_int8_gops_all_max"`
	// 95% intervals of the rounds' mean fractions (PrefillRoundStats); 0
	// for one round.
	PrefillRoundFractionCILo     float64 `parquet:"prefill_round_fraction_ci_lo"`
	PrefillRoundFractionCIHi     float64 `parquet:"prefill_round_fraction_ci_hi"`
	PrefillRoundFractionMixCILo  float64 `parquet:"prefill_round_fraction_mix_ci_lo"`
	PrefillRoundFractionMixCIHi  float64 `parquet:"prefill_round_fraction_mix_ci_hi"`
	PrefillRoundFractionVNNICILo float64 `parquet:"prefill_round_fraction_vnni_ci_lo"`
	PrefillRoundFractionVNNICIHi float64 `parquet:"prefill_round_fraction_vnni_ci_hi"`
}

// RooflineTable is the directory of roofline runs under a results root.
const RooflineTable = "roofline"

// RooflineRecords joins a run's measurements into its rows; rates, rounds
// and prefillRounds may be nil when the kernels, the decode rounds or the
// prefill rounds were not measured.
func RooflineRecords(meta RunMeta, mc Machine, parts []Traffic, rates []KernelRate, sp Speed, rounds []DecodeRound, prefillRounds []PrefillRound) []RooflineRecord {
	var total Traffic
	if len(parts) > 0 {
		total = parts[len(parts)-1]
	}
	work := PrefillWork(parts, sp.PrefillTokens)
	dl, pl, plm, plv, kl := DecodeLimit(mc, total), PrefillLimit(mc, work), PrefillLimitMix(mc, work), PrefillLimitVNNI(mc, work), KernelLimit(rates)
	med, flo, fhi := RoundFractions(rounds, total.Bytes)
	cilo, cihi := RoundFractionsCI(rounds, total.Bytes)
	var glo, ghi float64
	for i, r := range rounds {
		if i == 0 || r.ReadGBs < glo {
			glo = r.ReadGBs
		}
		ghi = max(ghi, r.ReadGBs)
	}
	pst := SummarizePrefillRounds(prefillRounds, mc, work)
	recs := make([]RooflineRecord, len(parts))
	for i, t := range parts {
		r := RooflineRecord{RunMeta: meta, Machine: mc, Traffic: t, Speed: sp, DecodeLimitTPS: dl, PrefillLimitTPS: pl,
			PrefillLimitMixTPS: plm, PrefillLimitVNNITPS: plv, KernelLimitTPS: kl,
			PrefillMACsInt8: work.MACsInt8, PrefillMACsQ8_0: work.MACsQ8_0, PrefillMACsFloat: work.MACsFloat,
			DecodeRounds: int64(len(rounds)), DecodeRoundFraction: med, DecodeRoundFractionMin: flo, DecodeRoundFractionMax: fhi,
			DecodeRoundReadGBsMin: glo, DecodeRoundReadGBsMax: ghi,
			PrefillRounds: int64(len(prefillRounds)), PrefillRoundFraction: pst.Fraction, PrefillRoundFractionMin: pst.FractionMin,
			PrefillRoundFractionMax: pst.FractionMax, PrefillRoundFractionMix: pst.FractionMix, PrefillRoundFractionVNNI: pst.FractionVNNI,
			PrefillRoundInt8GopsAllMin: pst.Int8GopsMin, PrefillRoundInt8GopsAllMax: pst.Int8GopsMax,
			DecodeRoundFractionCILo: cilo, DecodeRoundFractionCIHi: cihi,
			PrefillRoundFractionCILo: pst.FractionCILo, PrefillRoundFractionCIHi: pst.FractionCIHi,
			PrefillRoundFractionMixCILo: pst.FractionMixCILo, PrefillRoundFractionMixCIHi: pst.FractionMixCIHi,
			PrefillRoundFractionVNNICILo: pst.FractionVNNICILo, PrefillRoundFractionVNNICIHi: pst.FractionVNNICIHi}
		if plm > 0 {
			r.PrefillFractionMix = sp.PrefillTPS / plm
		}
		if plv > 0 {
			r.PrefillFractionVNNI = sp.PrefillTPS / plv
		}
		if dl > 0 {
			r.DecodeFraction = sp.DecodeTPS / dl
		}
		if kl > 0 {
			r.DecodeKernelFraction = sp.DecodeTPS / kl
		}
		if pl > 0 {
			r.PrefillFraction = sp.PrefillTPS / pl
		}
		recs[i] = r
	}
	return recs
}
