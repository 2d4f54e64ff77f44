package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

// RooflineOptions configures RunRoofline.
type RooflineOptions struct {
	Probe         MachineConfig // the machine probes
	Speed         bool          // measure the model's speed, which Lock, the rounds and Ops need
	Prefill       int           // prompt tokens prefilled to measure prefill speed
	Decode        int           // tokens decoded to measure decode speed
	Lock          bool          // pin the weights in memory while measuring speed
	Rounds        int           // decode rounds, each between bandwidth probes (0: none)
	PrefillRounds int           // prefill rounds, each between int8 dot probes (0: none)
	Ops           bool          // time each matrix product of the decode steps
	Step          func(string)  // when set, called with a line naming each probe as it starts
	Bar           BarFunc       // when set, the progress bars of the model's runs
	// DiskPath, when set, is the model file the disk probe reads
	// (ProbeDisk with Disk).
	DiskPath string
	Disk     DiskConfig
}

// BarFunc starts a progress bar, labelled label, that counts total tokens,
// and returns its tick and finish.
type BarFunc func(label string, total int) (tick func(n int), finish func())

// start starts bar when set; a nil bar's tick and finish do nothing.
func (bar BarFunc) start(label string, total int) (tick func(n int), finish func()) {
	if bar == nil {
		return func(int) {}, func() {}
	}
	return bar(label, total)
}

// report calls step with s when step is set.
func report(step func(string), s string) {
	if step != nil {
		step(s)
	}
}

// Roofline is one roofline run's measurements: the machine, the decode
// traffic, the kernels' rates and, where measured, the model's speed, its
// rounds and its decode steps' matrix products.
type Roofline struct {
	Machine       Machine
	Parts         []Traffic // DecodeTraffic: each part, then the total
	Rates         []KernelRate
	Speed         Speed // zero when not measured
	DecodeRounds  []DecodeRound
	PrefillRounds []PrefillRound
	Ops           []DecodeOp
	OpStep        time.Duration // the decode step's time when Ops were timed
	Disk          Disk          // zero when not probed
	// Streaming says the speed run streamed the experts from disk, with,
	// over its timed decode: HitRate the share of the expert requests that
	// needed no read (a prefetch a Request used counts as a read:
	// expertcache.NeedRate), WasteRate the prefetches no Request used, per
	// request, DiskBusy the share of the time with reads in flight and
	// DiskReadGBs the rate of the reads while there were. ExpertRequests
	// are the routed experts a token requests and ExpertBytes the bytes of
	// one.
	Streaming      bool
	HitRate        float64
	WasteRate      float64
	DiskBusy       float64
	DiskReadGBs    float64
	ExpertRequests int
	ExpertBytes    int64
}

// LockError is the error of a run that could not pin the weights in
// memory.
type LockError struct{ Err error }

func (e *LockError) Error() string { return e.Err.Error() }

func (e *LockError) Unwrap() error { return e.Err }

// lockAll pins the weights of every model in memory and returns the
// function that unpins them all; its error is a *LockError.
func lockAll(ms ...*engine.Model) (unlock func(), err error) {
	var unlocks []func()
	unlock = func() {
		for _, u := range unlocks {
			u()
		}
	}
	for _, m := range ms {
		u, err := LockWeights(m.File)
		if err != nil {
			unlock()
			return func() {}, &LockError{err}
		}
		unlocks = append(unlocks, u)
	}
	return unlock, nil
}

// RunRoofline measures the machine's limits, the weight bytes and
// multiply-adds of a decode step of m and each weight type's dot kernel
// on be, then, with opt.Speed, the model's speed and the rounds and
// products opt asks for. The bandwidth and the arithmetic peaks are
// probed again after the speed run and the best figures kept.
func RunRoofline(ctx context.Context, m *engine.Model, be *cpu.Backend, opt RooflineOptions) (*Roofline, error) {
	r := &Roofline{}
	var err error
	if r.Parts, err = DecodeTraffic(m.File, m.Params); err != nil {
		return nil, err
	}
	if r.Machine, err = MeasureMachine(ctx, opt.Probe, opt.Step); err != nil {
		return nil, err
	}
	byType, err := DecodeBytesByType(m.File, m.Params)
	if err != nil {
		return nil, err
	}
	if r.Rates, err = MeasureKernels(ctx, be.Kernels(), byType, r.Machine, opt.Probe, opt.Step); err != nil {
		return nil, err
	}
	if opt.DiskPath != "" {
		report(opt.Step, fmt.Sprintf("the disk: sequential and random %.1f MiB reads, 1 and 8 in flight", float64(opt.Disk.Block)/(1<<20)))
		if r.Disk, err = ProbeDisk(ctx, opt.DiskPath, opt.Disk); err != nil {
			return nil, err
		}
	}
	r.ExpertRequests = m.Params.Layers * m.Params.ExpertsUsed
	r.ExpertBytes = meanExpertBytes(m)
	if opt.Speed {
		if err := r.measureSpeed(ctx, m, be, &opt); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// measureSpeed measures the model's speed, probes the machine again and
// runs the rounds and times the products of opt, the weights pinned with
// opt.Lock.
func (r *Roofline) measureSpeed(ctx context.Context, m *engine.Model, be backends.Backend, opt *RooflineOptions) error {
	if opt.Lock {
		unlock, err := lockAll(m)
		if err != nil {
			return err
		}
		defer unlock()
	}
	tick, finish := opt.Bar.start("prefill+decode", 2*opt.Prefill+opt.Decode+speedWarmup)
	sp, err := MeasureSpeed(ctx, m, be, opt.Prefill, opt.Decode, tick)
	finish()
	if err != nil {
		return err
	}
	r.Speed = sp
	if d := sp.Experts; d != nil {
		r.Streaming = true
		r.HitRate = 1 - d.NeedRate()
		if n := d.Hits + d.Misses; n > 0 {
			r.WasteRate = float64(d.Prefetched-d.PrefetchUsed) / float64(n)
		}
		if sp.DecodeTPS > 0 {
			r.DiskBusy = d.Busy.Seconds() * sp.DecodeTPS / float64(sp.DecodeTokens)
		}
		r.DiskReadGBs = GBs(d.BytesRead, d.Busy)
	}
	// The bandwidth and the arithmetic peaks drift; the best of the
	// probes before and after the run keeps the fractions of the speed of
	// light and of the compute limit conservative.
	if err := ReprobeRead(ctx, opt.Probe, &r.Machine, opt.Step); err != nil {
		return err
	}
	if err := ReprobeCompute(ctx, opt.Probe, &r.Machine, opt.Step); err != nil {
		return err
	}
	if r.Streaming && opt.DiskPath != "" {
		report(opt.Step, "the disk again")
		d, err := ProbeDisk(ctx, opt.DiskPath, opt.Disk)
		if err != nil {
			return err
		}
		r.Disk = r.Disk.Best(d)
	}
	SetFloors(r.Rates, r.Machine)
	if opt.Rounds > 0 {
		report(opt.Step, fmt.Sprintf("the read bandwidth around each of %d decode rounds", opt.Rounds))
		tick, finish := opt.Bar.start("decode rounds", opt.Rounds*(opt.Decode+speedWarmup))
		r.DecodeRounds, err = MeasureDecodeRounds(ctx, m, be, opt.Probe, opt.Prefill, opt.Decode, opt.Rounds, tick)
		finish()
		if err != nil {
			return err
		}
	}
	if opt.PrefillRounds > 0 {
		report(opt.Step, fmt.Sprintf("the int8 dot peaks around each of %d prefill rounds", opt.PrefillRounds))
		tick, finish := opt.Bar.start("prefill rounds", (opt.PrefillRounds+1)*opt.Prefill)
		r.PrefillRounds, err = MeasurePrefillRounds(ctx, m, be, opt.Probe, opt.Prefill, opt.PrefillRounds, tick)
		finish()
		if err != nil {
			return err
		}
	}
	if opt.Ops {
		report(opt.Step, "the decode steps' matrix products")
		if r.Ops, r.OpStep, err = MeasureDecodeOps(ctx, m, be, opt.Prefill, opt.Decode); err != nil {
			return err
		}
	}
	return nil
}

// Records returns the run's roofline rows (RooflineRecords), with the
// disk probe's figures and, when the speed run streamed the experts, the
// SSD streaming speed of light (StreamingLimit at the faster of the
// random reads' bandwidths, 1 or 8 in flight) and the decode speed's
// fraction of it.
func (r *Roofline) Records(meta RunMeta) []RooflineRecord {
	recs := RooflineRecords(meta, r.Machine, r.Parts, r.Rates, r.Speed, r.DecodeRounds, r.PrefillRounds)
	for i := range recs {
		rec := &recs[i]
		rec.Disk = r.Disk
		if r.Streaming {
			rec.SSDLimit = StreamingLimit(rec.DecodeLimitTPS, r.HitRate, r.ExpertRequests, r.ExpertBytes, max(r.Disk.DiskRand1GBs, r.Disk.DiskRand8GBs))
			rec.SSDWastedPerToken = r.WasteRate * float64(r.ExpertRequests)
			rec.SSDDiskBusy, rec.SSDDiskReadGBs = r.DiskBusy, r.DiskReadGBs
			if rec.SSDDecodeLimitTPS > 0 {
				rec.SSDDecodeFraction = rec.DecodeTPS / rec.SSDDecodeLimitTPS
			}
		}
	}
	return recs
}

// ExpertReadBlock returns the disk probe's read for m: the mean bytes of
// one of its routed experts (gate, up and down slices), rounded to whole
// MiB (7 MiB for Flash q2, 18 MiB for Pro q2), or ExpertReadBytes for a
// model without routed expert stacks.
func ExpertReadBlock(m *engine.Model) int64 {
	n := meanExpertBytes(m)
	if n <= 0 {
		return ExpertReadBytes
	}
	const mib = 1 << 20
	return max(mib, (n+mib/2)/mib*mib)
}

// meanExpertBytes returns the mean bytes of one routed expert's gate, up
// and down slices over m's layers.
func meanExpertBytes(m *engine.Model) int64 {
	layers, _, err := m.ExpertLayers()
	if err != nil || len(layers) == 0 {
		return 0
	}
	var n int64
	for _, l := range layers {
		n += l.Gate.Bytes + l.Up.Bytes + l.Down.Bytes
	}
	return n / int64(len(layers))
}

// KernelRecords returns the run's kernel rows, kernels naming the
// backend's kernel set.
func (r *Roofline) KernelRecords(meta RunMeta, kernels string) []KernelRecord {
	recs := make([]KernelRecord, len(r.Rates))
	for i, k := range r.Rates {
		recs[i] = KernelRecord{RunMeta: meta, KernelRate: k, Kernels: kernels}
	}
	return recs
}

// OpRecords returns the run's decode-product rows, none when the products
// were not timed.
func (r *Roofline) OpRecords(meta RunMeta) []DecodeOpRecord {
	if r.Ops == nil {
		return nil
	}
	recs := make([]DecodeOpRecord, len(r.Ops))
	for i, op := range r.Ops {
		recs[i] = DecodeOpRecord{RunMeta: meta, DecodeOp: op, StepMillis: r.OpStep.Seconds() * 1e3}
	}
	return recs
}

// WriteRooflineRun writes the run under root: its roofline rows, its
// kernel rows and, when timed, its decode-product rows, each a Parquet
// file of its table; it returns the files' paths.
func WriteRooflineRun(root string, meta RunMeta, kernels string, r *Roofline) ([]string, error) {
	var paths []string
	path, err := WriteRun(root, RooflineTable, meta, r.Records(meta))
	if err != nil {
		return nil, err
	}
	paths = append(paths, path)
	if path, err = WriteRun(root, RooflineKernelTable, meta, r.KernelRecords(meta, kernels)); err != nil {
		return paths, err
	}
	paths = append(paths, path)
	if r.Ops != nil {
		if path, err = WriteRun(root, RooflineOpsTable, meta, r.OpRecords(meta)); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
