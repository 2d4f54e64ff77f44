package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/gguf"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/internal/progress"
)

// rooflineDoc describes the roofline subcommand in its help.
const rooflineDoc = `Measures this machine's limits (memory-read bandwidth and the peak of the
dot kernels' float32 FMA and int8 mixes, with 1 thread and all threads),
the weight bytes one decode step of the model reads (per layer and in
total, with the model's active-expert count), the decode speed of light
(bandwidth / bytes) and the compute-bound prefill limit, then the
model's prefill and decode speed and their fractions of those limits.
Where the CPU has AVX-512 VNNI, whose int8 dot the avx512 kernels use,
the int8 peak and the prefill limit are also given for it. The AVX2
Q8_0 dot multiplies two signed operands and so moves signs as well: its
mix is probed too, and the avx2 mix limit takes the Q8_0 weights'
multiply-adds at that peak and the others' at the int8 one. It also
times each weight type's dot kernel on rows in cache: a type whose
kernel is slower than memory bounds decode below the speed of light,
and the decode kernel limit sums those bounds. The bandwidth and the
arithmetic peaks are probed again after the model ran and the best
figures kept, since a shared machine's figures move. For the same reason
decode is also measured in rounds between bandwidth probes (--rounds):
their median fraction of the speed of light is taken at the better of
the bandwidths probed just before and just after each round; and
prefill in rounds between runs of the int8 dot probes
(--prefill-rounds), whose median fraction of the compute limit is taken
likewise at the better of the peaks around each round. The disk under
the model file is probed too: sequential and random reads of one of the
model's routed experts (rounded to whole MiB: 7 MiB for Flash q2, 18 MiB
for Pro q2), 1 and 8 in flight, with O_DIRECT where the file
system allows; with --ssd-streaming the decode speed of light becomes the
larger of the memory time and the disk time of the misses the speed
run's hit rate predicts (docs/performance.md).`

// rooflineFlags are the flags of ds4-bench roofline.
type rooflineFlags struct {
	model                 string
	probes                *probeFlags
	prefill, decode       int
	noSpeed               bool
	rounds, prefillRounds int
	opsFlag, lock         bool
	inMemory              bool
	parquetDir, hash      string
	noProgress            bool
	diskMB                int
	ssd                   *cli.Streaming
}

// parseRoofline parses and checks the roofline subcommand's arguments.
func parseRoofline(args []string, stderr io.Writer) (*rooflineFlags, error) {
	fs := pflag.NewFlagSet("ds4-bench roofline", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	f := &rooflineFlags{}
	fs.StringVarP(&f.model, "model", "m", "", cli.ModelUsage)
	f.probes = addProbeFlags(fs)
	fs.IntVar(&f.prefill, "prefill", 64, "prompt tokens prefilled to measure prefill speed")
	fs.IntVar(&f.decode, "decode", 16, "tokens decoded after the prefill (and 4 untimed ones) to measure decode speed")
	fs.BoolVar(&f.noSpeed, "no-speed", false, "skip measuring the model's speed")
	fs.IntVar(&f.rounds, "rounds", 5, "decode rounds of --decode tokens, each between two bandwidth probes (0: none)")
	fs.IntVar(&f.prefillRounds, "prefill-rounds", 3, "prefill rounds of --prefill tokens, each between two runs of the int8 dot probes (0: none)")
	fs.BoolVar(&f.opsFlag, "ops", false, "also time each matrix product of the decode steps and print where a step's time goes")
	fs.BoolVar(&f.lock, "lock", true, "pin the weights in memory (mlock) while measuring the model's speed")
	fs.BoolVar(&f.inMemory, "in-memory", false, "read the model into memory of its own with huge pages instead of mapping the file")
	fs.StringVar(&f.parquetDir, "parquet", "", "write the run as Parquet under DIR/roofline/…")
	fs.StringVar(&f.hash, "hash", string(harness.DefaultHash), "model fingerprint in the run metadata: sha256, quick or none")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress lines on stderr")
	fs.IntVar(&f.diskMB, "disk-mb", 1024, "MiB each disk probe reads from the model file (0: no disk probe)")
	f.ssd = cli.AddStreaming(fs)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	return f, f.check(fs)
}

// check checks the parsed flags of fs against each other.
func (f *rooflineFlags) check(fs *pflag.FlagSet) error {
	switch {
	case fs.NArg() > 0:
		return cli.Usage(fmt.Errorf("roofline: unexpected argument %q", fs.Arg(0)))
	case f.probes.check(fs) != nil:
		return cli.Usage(fmt.Errorf("roofline: %w", f.probes.check(fs)))
	case !f.noSpeed && f.prefill <= 0:
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "prefill", "must be at least 1")))
	case !f.noSpeed && f.decode <= 0:
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "decode", "must be at least 1")))
	case !harness.HashMode(f.hash).Valid():
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "hash", "must be sha256, quick or none")))
	case f.noSpeed && f.opsFlag:
		return cli.Usage(errors.New("roofline: --ops times the decode steps, which --no-speed skips"))
	case f.rounds < 0:
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "rounds", "must be at least 0 (0: none)")))
	case f.noSpeed && fs.Changed("rounds") && f.rounds > 0:
		return cli.Usage(errors.New("roofline: --rounds decodes, which --no-speed skips"))
	case f.prefillRounds < 0:
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "prefill-rounds", "must be at least 0 (0: none)")))
	case f.noSpeed && fs.Changed("prefill-rounds") && f.prefillRounds > 0:
		return cli.Usage(errors.New("roofline: --prefill-rounds prefills, which --no-speed skips"))
	case f.diskMB < 0:
		return cli.Usage(fmt.Errorf("roofline: %w", cli.FlagError(fs, "disk-mb", "must be at least 0 (0: no disk probe)")))
	case f.ssd.Check() != nil:
		return cli.Usage(fmt.Errorf("roofline: %w", f.ssd.Check()))
	case f.ssd.On && f.inMemory:
		return cli.Usage(errors.New("roofline: --in-memory reads the whole file, --ssd-streaming reads the experts on demand: give one"))
	}
	return nil
}

// probeBytes returns the most memory the probes hold at once for model m:
// the bandwidth probe's buffer, or the disk probe's reads in flight.
func (f *rooflineFlags) probeBytes(m *engine.Model) int64 {
	return max(int64(f.probes.bufMB)<<20, 8*harness.ExpertReadBlock(m))
}

// runRoofline is the roofline subcommand.
func runRoofline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseRoofline(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.InputFile("model", f.model); err != nil {
		return cli.Usage(fmt.Errorf("roofline: %w", err))
	}
	m, modelPath, err := cli.OpenModel(f.model, f.inMemory, "ds4-bench", stderr)
	if err != nil {
		return err
	}
	if m.File != nil {
		defer m.File.Close()
	}
	streamed, err := f.ssd.StartStreaming(m, modelPath, cli.StreamSetup{Context: f.prefill + f.decode + 64, Reserve: f.probeBytes(m)}, "ds4-bench", stderr)
	if err != nil {
		return err
	}
	defer streamed.Stop()
	be := cpu.New(f.probes.threads)
	defer be.Close()
	meta, err := harness.CollectMeta(harness.MetaOptions{
		Tool: "ds4-bench roofline", ModelPath: modelPath, Model: m, Backend: "cpu", Threads: be.Workers(),
		Hash: harness.HashMode(f.hash), Args: append([]string{"ds4-bench", "roofline"}, args...), Progress: stderr,
	})
	if err != nil {
		return err
	}
	meta.Notes = "kernels=" + be.Kernels().Name
	if f.inMemory {
		meta.Notes += " in-memory"
	}
	if f.ssd.On {
		// Locking the whole file would read every expert into memory,
		// which streaming exists to avoid; the resident part is pinned.
		f.lock = false
		meta.Notes += fmt.Sprintf(" ssd-streaming experts=%d", streamed.Slots)
	}
	opt := harness.RooflineOptions{
		Probe: f.probes.config(be.Workers()), Speed: !f.noSpeed, Prefill: f.prefill, Decode: f.decode, Lock: f.lock,
		Rounds: f.rounds, PrefillRounds: f.prefillRounds, Ops: f.opsFlag,
		Step: probeStep(stderr, f.noProgress), Bar: bars(stderr, f.noProgress),
	}
	if modelPath != "" && f.diskMB > 0 {
		opt.DiskPath = modelPath
		opt.Disk = harness.DefaultDiskConfig()
		opt.Disk.Block = harness.ExpertReadBlock(m)
		opt.Disk.Bytes = int64(f.diskMB) << 20
	}
	r, err := harness.RunRoofline(ctx, m, be, opt)
	if err != nil {
		return lockHint(err)
	}
	// With --ssd-streaming the routed experts are read into the expert
	// cache, not through the mapping: only the pinned weights count.
	mapped := int64(0)
	if streamed != nil {
		mapped = engine.PinnedBytes(m)
	}
	meta.Notes += hugePageNote(m.File, modelPath, mapped, f.inMemory, stderr)
	return reportRoofline(stdout, stderr, meta, r, be.Kernels().Name, f.parquetDir)
}

// reportRoofline prints the run r, whose kernel set is kernels, and, when
// parquetDir is set, writes it there as Parquet.
func reportRoofline(stdout, stderr io.Writer, meta harness.RunMeta, r *harness.Roofline, kernels, parquetDir string) error {
	printRoofline(stdout, meta, r.Records(meta), r.Rates, kernels)
	if r.Ops != nil {
		printDecodeOps(stdout, r.Ops, r.OpStep)
	}
	if parquetDir == "" {
		return nil
	}
	paths, err := harness.WriteRooflineRun(parquetDir, meta, kernels, r)
	for _, path := range paths {
		fmt.Fprintf(stderr, "ds4-bench: wrote %s\n", path)
	}
	return err
}

// lockHint adds to an error of locking the weights how to measure
// without.
func lockHint(err error) error {
	var le *harness.LockError
	if errors.As(err, &le) {
		return fmt.Errorf("%w (run with --lock=false to measure unpinned)", err)
	}
	return err
}

// bars returns the runs' progress bars on stderr, labelled as ds4-bench's;
// none when quiet.
func bars(stderr io.Writer, quiet bool) func(label string, total int) (tick func(n int), finish func()) {
	return func(label string, total int) (func(int), func()) {
		return tokenBar(stderr, quiet, "ds4-bench: "+label, total)
	}
}

// tokenBar returns a progress bar's tick, which counts tokens towards
// total, and its finish; with quiet both do nothing.
func tokenBar(stderr io.Writer, quiet bool, label string, total int) (tick func(n int), finish func()) {
	if quiet {
		return func(int) {}, func() {}
	}
	bar := progress.New(stderr, label, int64(total), " tok")
	return func(n int) { bar.Add(int64(n)) }, bar.Finish
}

// probeFlags are the machine probes' options, which roofline and
// extrapolate share.
type probeFlags struct {
	threads, bufMB, trials int
	minTime                time.Duration
}

// addProbeFlags registers the probe options on fs.
func addProbeFlags(fs *pflag.FlagSet) *probeFlags {
	p := &probeFlags{}
	fs.IntVarP(&p.threads, "threads", "t", 0, "CPU worker threads and all-threads probe width (0: one per CPU)")
	fs.IntVar(&p.bufMB, "buffer-mb", 1024, "bandwidth probe buffer in MiB (much larger than the last-level cache)")
	fs.DurationVar(&p.minTime, "min-time", time.Second, "shortest timed run of each probe")
	fs.IntVar(&p.trials, "trials", 3, "timed runs per probe; the best is kept")
	return p
}

// check returns an error naming the first option of fs out of range.
func (p *probeFlags) check(fs *pflag.FlagSet) error {
	switch {
	case p.threads < 0:
		return cli.Threads(fs, p.threads)
	case p.bufMB <= 0:
		return cli.FlagError(fs, "buffer-mb", "must be at least 1")
	case p.minTime <= 0:
		return cli.FlagError(fs, "min-time", "must be positive")
	case p.trials <= 0:
		return cli.FlagError(fs, "trials", "must be at least 1")
	}
	return nil
}

// config returns the probes' configuration for a backend of workers
// threads.
func (p *probeFlags) config(workers int) harness.MachineConfig {
	return harness.MachineConfig{BufferBytes: int64(p.bufMB) << 20, Threads: workers, MinTime: p.minTime, Trials: p.trials}
}

// probeStep returns the probes' progress callback: a line on stderr for
// each probe, none when quiet.
func probeStep(stderr io.Writer, quiet bool) func(string) {
	return func(s string) {
		if !quiet {
			fmt.Fprintf(stderr, "ds4-bench: probing %s\n", s)
		}
	}
}

// hugePageNote returns the run-notes entry " huge-pages=F", F the
// fraction of the weights the run reads through the mapping of the model
// file f that are mapped through huge pages: of mapped bytes, or of the
// whole file when mapped is 0. It is "" where that is unknown or no file
// was opened (path "": the built-in model); hugePageNoteOf says the rest.
func hugePageNote(f *gguf.File, path string, mapped int64, inMemory bool, stderr io.Writer) string {
	if path == "" {
		return ""
	}
	n, err := f.HugePageBytes()
	if err != nil {
		return ""
	}
	huge, of := mappedHuge(n, f.Size(), mapped)
	return hugePageNoteOf(huge, of, path, inMemory, stderr)
}

// mappedHuge returns the huge-page bytes of a file of size bytes, huge of
// its mapping on huge pages, that count against the mapped bytes the run
// reads through the mapping (the whole file when mapped is 0), and those.
func mappedHuge(huge, size, mapped int64) (int64, int64) {
	if mapped <= 0 {
		return huge, size
	}
	return min(huge, mapped), mapped
}

// hugePageNoteOf returns the run-notes entry for huge of size bytes on
// huge pages. Where less than half is and the file is mapped, it tells on
// stderr how to let the page cache hold the file in huge pages.
func hugePageNoteOf(huge, size int64, path string, inMemory bool, stderr io.Writer) string {
	if size <= 0 {
		return ""
	}
	frac := float64(huge) / float64(size)
	if frac < 0.5 && !inMemory {
		fmt.Fprintf(stderr, "ds4-bench: only %.0f%% of the weights are mapped through 2 MiB pages: the page cache holds %s in small pages, "+
			"as it may a file just written or copied. Drop it from the cache (dd if=%s iflag=nocache count=0) and the next run reads it back in huge pages.\n",
			100*frac, path, path)
	}
	return fmt.Sprintf(" huge-pages=%.3f", frac)
}

// printDecodeOps writes where a decode step's time goes: each kind of
// matrix product and the rest.
func printDecodeOps(w io.Writer, ops []harness.DecodeOp, step time.Duration) {
	stepMs := step.Seconds() * 1e3
	var sum float64
	for _, op := range ops {
		sum += op.Millis
	}
	fmt.Fprintf(w, "\ndecode step %.3f ms (timed again, each product on its own), of which the matrix products %.3f ms; per step:\n", stepMs, sum)
	// Names read best left-aligned and numbers right-aligned; tabwriter
	// aligns every column one way, so the names are padded here.
	const rest = "the rest (norms, attention, routing, ...)"
	width := len(rest)
	for _, op := range ops {
		width = max(width, len(op.Op))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tcalls\tms\tMB\tGB/s\tshare\t\n", width, "product")
	for _, op := range ops {
		fmt.Fprintf(tw, "%-*s\t%.0f\t%.3f\t%.2f\t%.1f\t%.1f%%\t\n", width, op.Op, op.Calls, op.Millis, float64(op.Bytes)/1e6, op.GBs, 100*op.Millis/stepMs)
	}
	fmt.Fprintf(tw, "%-*s\t\t%.3f\t\t\t%.1f%%\t\n", width, rest, stepMs-sum, 100*(stepMs-sum)/stepMs)
	tw.Flush()
}

// printRoofline writes the run's report: the machine, the traffic table,
// the kernel rates and the limits and fractions.
func printRoofline(w io.Writer, meta harness.RunMeta, recs []harness.RooflineRecord, rates []harness.KernelRate, kernels string) {
	if len(recs) == 0 {
		return
	}
	r := recs[len(recs)-1]
	printMachine(w, meta, r)
	if r.DiskBlockBytes > 0 {
		printDisk(w, r)
	}
	printTraffic(w, recs)
	if len(rates) > 0 {
		printKernelRates(w, rates, kernels, r.ProbeThreads)
	}
	printLimits(w, r)
	if r.DecodeTokens > 0 {
		printFractions(w, r, kernels)
	}
}

// mb formats b bytes in MB.
func mb(b int64) string { return fmt.Sprintf("%.2f", float64(b)/1e6) }

// printMachine writes the machine's probed limits of the total row r.
func printMachine(w io.Writer, meta harness.RunMeta, r harness.RooflineRecord) {
	fmt.Fprintf(w, "machine: %s, %d threads, %s\n", meta.CPUModel, r.ProbeThreads, meta.Notes)
	fmt.Fprintf(w, "read bandwidth   %8.2f GB/s (1 thread)  %8.2f GB/s (%d threads)\n", r.ReadGBs1, r.ReadGBsAll, r.ProbeThreads)
	fmt.Fprintf(w, "float32 FMA      %8.2f GFLOP/s          %8.2f GFLOP/s\n", r.FMAGflops1, r.FMAGflopsAll)
	fmt.Fprintf(w, "int8 dot (AVX2)  %8.2f Gop/s            %8.2f Gop/s\n", r.Int8Gops1, r.Int8GopsAll)
	if r.Q8_0GopsAll > 0 {
		fmt.Fprintf(w, "Q8_0 dot (AVX2)  %8.2f Gop/s            %8.2f Gop/s   (the int8 dot with the sign step of Q8_0's signed weights)\n", r.Q8_0Gops1, r.Q8_0GopsAll)
	}
	if r.VNNIGopsAll > 0 {
		fmt.Fprintf(w, "int8 dot (VNNI)  %8.2f Gop/s            %8.2f Gop/s\n", r.VNNIGops1, r.VNNIGopsAll)
	}
	if r.DecodeTokens > 0 {
		fmt.Fprintln(w, "                 (each the best of probes before and after the model ran)")
	}
	fmt.Fprintln(w)
}

// printDisk writes the disk probe's figures of the total row r.
func printDisk(w io.Writer, r harness.RooflineRecord) {
	how := "O_DIRECT"
	if !r.DiskDirect {
		how = "buffered, the file dropped from the page cache first: the file system refused O_DIRECT"
	}
	fmt.Fprintf(w, "disk (model file, %.1f MiB reads, %s):\n", float64(r.DiskBlockBytes)/(1<<20), how)
	fmt.Fprintf(w, "                 %8.3f GB/s sequential  %8.3f GB/s random, 1 in flight  %8.3f GB/s random, 8 in flight\n\n",
		r.DiskSeqGBs, r.DiskRand1GBs, r.DiskRand8GBs)
}

// printTraffic writes the decode traffic table, a line per part.
func printTraffic(w io.Writer, recs []harness.RooflineRecord) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "part\tlayer\tratio\tdense MB\texperts MB\ttotal MB\tindexer MB (long ctx)\tint8 MMAC\tfloat MMAC\t")
	for _, r := range recs {
		layer, ratio := "", ""
		if r.Part == "layer" {
			layer, ratio = fmt.Sprint(r.Layer), fmt.Sprint(r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t\n", r.Part, layer, ratio, mb(r.DenseBytes), mb(r.ExpertBytes),
			mb(r.Bytes), mb(r.IndexerBytes), float64(r.MACsInt8)/1e6, float64(r.MACsFloat)/1e6)
	}
	tw.Flush()
}

// printKernelRates writes each weight type's dot-kernel rates and floor.
func printKernelRates(w io.Writer, rates []harness.KernelRate, kernels string, threads int64) {
	fmt.Fprintf(w, "\ndot kernels (%s) on rows in cache, and each type's floor per decode step:\n", kernels)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "type\tdecode MB\tGB/s 1 thread\tGB/s %d threads\tfloor ms\t\n", threads)
	for _, k := range rates {
		rate1, rateAll := "-", "-"
		if k.GBsAll > 0 {
			rate1, rateAll = fmt.Sprintf("%.2f", k.GBs1), fmt.Sprintf("%.2f", k.GBsAll)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.3f\t\n", k.Type, mb(k.DecodeBytes), rate1, rateAll, k.FloorMs)
	}
	tw.Flush()
}

// printLimits writes the decode and prefill limits of the total row r.
func printLimits(w io.Writer, r harness.RooflineRecord) {
	fmt.Fprintf(w, "\ndecode speed of light:  %.3f tok/s (%.2f GB/s over %s MB per token)\n", r.DecodeLimitTPS, r.ReadGBsAll, mb(r.Bytes))
	if r.KernelLimitTPS > 0 {
		fmt.Fprintf(w, "decode kernel limit:    %.3f tok/s (the floors summed: each type at the lesser of its kernel's rate and the bandwidth)\n", r.KernelLimitTPS)
	}
	if r.SSDDecodeLimitTPS > 0 {
		fmt.Fprintf(w, "ssd streaming limit:    %.3f tok/s (the longer of the memory time and %.2f misses × %.2f MB at %.3f GB/s: hit rate %.3f; %.2f wrong prefetches a token besides)\n",
			r.SSDDecodeLimitTPS, r.SSDMissesPerToken, r.SSDMissBytesPerToken/max(r.SSDMissesPerToken, 1e-300)/1e6, max(r.DiskRand1GBs, r.DiskRand8GBs), r.SSDHitRate, r.SSDWastedPerToken)
		fmt.Fprintf(w, "                        the decode's expert reads kept the disk busy %.3f of the time, at %.3f GB/s while they ran\n", r.SSDDiskBusy, r.SSDDiskReadGBs)
	}
	fmt.Fprintf(w, "prefill compute limit:  %.3f tok/s (int8 at the AVX2 int8-dot peak)\n", r.PrefillLimitTPS)
	if r.PrefillLimitMixTPS > 0 {
		fmt.Fprintf(w, "                        %.3f tok/s (Q8_0 weights' int8 at the AVX2 Q8_0-dot peak, the other int8 at the int8-dot one: the avx2 mix limit)\n", r.PrefillLimitMixTPS)
	}
	if r.PrefillLimitVNNITPS > 0 {
		fmt.Fprintf(w, "                        %.3f tok/s (int8 at the AVX-512 VNNI peak)\n", r.PrefillLimitVNNITPS)
	}
	fmt.Fprintf(w, "                        over %.1f int8 (%.1f of them Q8_0) and %.1f float MMAC per token: the layers', and the output head's shared\n",
		float64(r.PrefillMACsInt8)/1e6, float64(r.PrefillMACsQ8_0)/1e6, float64(r.PrefillMACsFloat)/1e6)
	fmt.Fprintf(w, "                        by the %d prompt tokens (Prefill computes the last token's logits only)\n", r.PrefillTokens)
}

// printFractions writes the measured decode and prefill speeds of the
// total row r and their fractions of the limits, kernels naming the
// kernel set that ran.
func printFractions(w io.Writer, r harness.RooflineRecord, kernels string) {
	fmt.Fprintf(w, "decode:   %.3f tok/s = %.3f of the speed of light (%.2f GB/s of weights)", r.DecodeTPS, r.DecodeFraction, r.DecodeTPS*float64(r.Bytes)/1e9)
	if r.KernelLimitTPS > 0 {
		fmt.Fprintf(w, ", %.3f of the kernel limit", r.DecodeKernelFraction)
	}
	if r.SSDDecodeLimitTPS > 0 {
		fmt.Fprintf(w, ", %.3f of the ssd streaming limit", r.SSDDecodeFraction)
	}
	fmt.Fprintln(w)
	if r.DecodeRounds > 0 {
		fmt.Fprintf(w, "          in %d rounds of %d tokens, each between bandwidth probes: %.3f of the speed of light (median; %.3f–%.3f at %.2f–%.2f GB/s%s)\n",
			r.DecodeRounds, r.DecodeTokens, r.DecodeRoundFraction, r.DecodeRoundFractionMin, r.DecodeRoundFractionMax, r.DecodeRoundReadGBsMin, r.DecodeRoundReadGBsMax,
			ciText(r.DecodeRounds, r.DecodeRoundFractionCILo, r.DecodeRoundFractionCIHi, "; ", ""))
	}
	switch {
	case r.PrefillLimitVNNITPS > 0 && strings.HasPrefix(kernels, "avx512"):
		// The avx512 sets multiply with VNNI, so its peak is the
		// limit; the tile kernels run faster than the AVX2 mix's.
		fmt.Fprintf(w, "prefill:  %.3f tok/s = %.3f of the compute limit at the VNNI peak, the %s kernels' (%.3f of the AVX2 int8-dot one)",
			r.PrefillTPS, r.PrefillFractionVNNI, kernels, r.PrefillFraction)
	case r.PrefillLimitVNNITPS > 0:
		fmt.Fprintf(w, "prefill:  %.3f tok/s = %.3f of the compute limit (%.3f of the avx2 mix limit, %.3f of the VNNI one)", r.PrefillTPS, r.PrefillFraction, r.PrefillFractionMix, r.PrefillFractionVNNI)
	default:
		fmt.Fprintf(w, "prefill:  %.3f tok/s = %.3f of the compute limit (%.3f of the avx2 mix limit)", r.PrefillTPS, r.PrefillFraction, r.PrefillFractionMix)
	}
	fmt.Fprintf(w, " (%d tokens; the session's first prefill ran at %.3f tok/s)\n", r.PrefillTokens, r.PrefillFirstTPS)
	if r.PrefillRounds > 0 {
		fmt.Fprintf(w, "          in %d rounds, each between int8 dot probes: %.3f of the compute limit (median; %.3f–%.3f at %.1f–%.1f Gop/s%s)",
			r.PrefillRounds, r.PrefillRoundFraction, r.PrefillRoundFractionMin, r.PrefillRoundFractionMax, r.PrefillRoundInt8GopsAllMin, r.PrefillRoundInt8GopsAllMax,
			ciText(r.PrefillRounds, r.PrefillRoundFractionCILo, r.PrefillRoundFractionCIHi, "; ", ""))
		if r.PrefillRoundFractionMix > 0 {
			fmt.Fprintf(w, ", %.3f of the avx2 mix limit%s", r.PrefillRoundFractionMix, ciText(r.PrefillRounds, r.PrefillRoundFractionMixCILo, r.PrefillRoundFractionMixCIHi, " (", ")"))
		}
		if r.PrefillRoundFractionVNNI > 0 {
			fmt.Fprintf(w, ", %.3f of the VNNI one%s", r.PrefillRoundFractionVNNI, ciText(r.PrefillRounds, r.PrefillRoundFractionVNNICILo, r.PrefillRoundFractionVNNICIHi, " (", ")"))
		}
		fmt.Fprintln(w)
	}
}

// ciText returns "mean's 95% CI [lo, hi]" between pre and post for an
// interval from n ≥ 2 rounds, else "".
func ciText(n int64, lo, hi float64, pre, post string) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf("%smean's 95%% CI [%.3f, %.3f]%s", pre, lo, hi, post)
}
