package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
)

// extrapolateDoc describes the extrapolate subcommand in its help.
const extrapolateDoc = `Projects decode and prefill speed, and their fractions of the speed of
light and of the compute limit, to a model of --layers layers (by
default the released model the slices' metadata describe: 43 layers for
Flash, 61 for Pro) from two slices of it that differ only in layer
count, such as those of ds4-quant synth --preset flash --layers 2 and
--layers 4, or --preset pro --layers 2 and --layers 3. The machine is
probed as by roofline; then both slices' speeds are measured in --pairs
alternating runs and each rate's median kept. A token's decode and
prefill times are taken to grow linearly with the layer count, each
layer past the larger slice's costing what the larger slice's extra
layers cost on average (for the Flash slices of 2 and 4 layers: one
layer of compression ratio 4 and one of 128, the ratios the released
model's layers 2..42 alternate; for the Pro slices of 2 and 3 layers:
one layer of ratio 4, dearer than the ratio-128 layers projected at its
cost); the projected model's weight bytes and multiply-adds are counted
exactly, each added layer as the larger slice's last layer of its
compression ratio.`

// runExtrapolate is the extrapolate subcommand.
func runExtrapolate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("ds4-bench extrapolate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	models := fs.StringArrayP("model", "m", nil, "GGUF slice; give two, in any order")
	layers := fs.Int("layers", 0, "layer count to project to (0: the released model's, 43 Flash or 61 Pro, from the slices' metadata)")
	pairs := fs.Int("pairs", 3, "alternating runs of the two slices")
	probes := addProbeFlags(fs)
	prefill := fs.Int("prefill", 64, "prompt tokens prefilled to measure prefill speed")
	decode := fs.Int("decode", 16, "tokens decoded after the prefill (and 4 untimed ones) to measure decode speed")
	lock := fs.Bool("lock", true, "pin both slices' weights in memory (mlock) while measuring")
	parquetDir := fs.String("parquet", "", "write the run as Parquet under DIR/"+harness.ExtrapolateTable+"/…")
	hash := fs.String("hash", string(harness.DefaultHash), "fingerprint of the larger slice in the run metadata: sha256, quick or none")
	noProgress := fs.Bool("no-progress", false, "no progress lines on stderr")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usage(fmt.Errorf("extrapolate: unexpected argument %q", fs.Arg(0)))
	case len(*models) != 2:
		return cli.Usage(fmt.Errorf("extrapolate: give two slices with -m, not %d", len(*models)))
	case *pairs <= 0:
		return cli.Usage(fmt.Errorf("extrapolate: %w", cli.FlagError(fs, "pairs", "must be at least 1")))
	case *layers < 0:
		return cli.Usage(fmt.Errorf("extrapolate: %w", cli.FlagError(fs, "layers", "must be at least 0 (0: the released model's)")))
	case probes.check(fs) != nil:
		return cli.Usage(fmt.Errorf("extrapolate: %w", probes.check(fs)))
	case *prefill <= 0:
		return cli.Usage(fmt.Errorf("extrapolate: %w", cli.FlagError(fs, "prefill", "must be at least 1")))
	case *decode <= 0:
		return cli.Usage(fmt.Errorf("extrapolate: %w", cli.FlagError(fs, "decode", "must be at least 1")))
	case !harness.HashMode(*hash).Valid():
		return cli.Usage(fmt.Errorf("extrapolate: %w", cli.FlagError(fs, "hash", "must be sha256, quick or none")))
	}
	for _, path := range *models {
		if err := cli.InputFile("model", path); err != nil {
			return cli.Usage(fmt.Errorf("extrapolate: %w", err))
		}
	}
	ms, paths, err := openSlices(*models)
	if err != nil {
		return err
	}
	defer ms[0].File.Close()
	defer ms[1].File.Close()
	small, large := ms[0], ms[1]
	if small.Params.Layers == large.Params.Layers {
		return cli.Usage(fmt.Errorf("extrapolate: both slices have %d layers; the layers' cost is their difference", small.Params.Layers))
	}
	if *layers, err = projectTo(*layers, large.Params); err != nil {
		return cli.Usage(fmt.Errorf("extrapolate: %w", err))
	}
	be := cpu.New(probes.threads)
	defer be.Close()
	meta, err := harness.CollectMeta(harness.MetaOptions{
		Tool: "ds4-bench extrapolate", ModelPath: paths[1], Model: large, Backend: "cpu", Threads: be.Workers(),
		Hash: harness.HashMode(*hash), Args: append([]string{"ds4-bench", "extrapolate"}, args...), Progress: stderr,
	})
	if err != nil {
		return err
	}
	meta.Notes = fmt.Sprintf("kernels=%s small=%s", be.Kernels().Name, filepath.Base(paths[0]))
	r, err := harness.RunExtrapolation(ctx, small, large, be, harness.ExtrapolateOptions{
		Layers: *layers, Pairs: *pairs, Prefill: *prefill, Decode: *decode, Probe: probes.config(be.Workers()), Lock: *lock,
		Names: [2]string{paths[0], paths[1]}, Step: probeStep(stderr, *noProgress), Bar: bars(stderr, *noProgress),
	})
	if err != nil {
		return lockHint(err)
	}
	printExtrapolation(stdout, meta, r.Machine, r.Extrapolation, paths, r.Runs)
	if *parquetDir != "" {
		path, err := harness.WriteExtrapolateRun(*parquetDir, meta, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-bench: wrote %s\n", path)
	}
	return nil
}

// projectTo returns the layer count to project the slice large of to:
// layers, or for 0 that of the released model large is a slice of; it is
// an error for it to be fewer than the slice's.
func projectTo(layers int, large layout.Params) (int, error) {
	if layers == 0 {
		m, ok := large.Model()
		if !ok {
			return 0, fmt.Errorf("the slices are not of a released model (%s): give --layers", large.Name)
		}
		layers = m.Layers
	}
	if layers < large.Layers {
		return 0, fmt.Errorf("--layers %d is fewer than the larger slice's %d", layers, large.Layers)
	}
	return layers, nil
}

// openSlices opens the two slices of paths and returns them, and their
// paths, the one of fewer layers first.
func openSlices(paths []string) ([2]*engine.Model, []string, error) {
	var ms [2]*engine.Model
	for i, path := range paths {
		m, err := engine.Open(path)
		if err != nil {
			if i == 1 {
				ms[0].File.Close()
			}
			return ms, nil, err
		}
		ms[i] = m
	}
	if ms[0].Params.Layers > ms[1].Params.Layers {
		return [2]*engine.Model{ms[1], ms[0]}, []string{paths[1], paths[0]}, nil
	}
	return ms, paths, nil
}

// printExtrapolation writes the run's report: the machine, each slice's
// measured speeds, the cost of a layer and the projection.
func printExtrapolation(w io.Writer, meta harness.RunMeta, mc harness.Machine, e harness.Extrapolation, paths []string, runs [2][]harness.Speed) {
	fmt.Fprintf(w, "machine: %s, %d threads, %s\n", meta.CPUModel, mc.ProbeThreads, meta.Notes)
	fmt.Fprintf(w, "read bandwidth %.2f GB/s, int8 dot %.2f Gop/s, float32 FMA %.2f GFLOP/s (%d threads; the best of probes before and after the runs)\n\n",
		mc.ReadGBsAll, mc.Int8GopsAll, mc.FMAGflopsAll, mc.ProbeThreads)
	rangeOf := func(rs []harness.Speed, rate func(harness.Speed) float64) string {
		lo, hi := harness.SpeedRange(rs, rate)
		return fmt.Sprintf("%.3f–%.3f", lo, hi)
	}
	decode := func(s harness.Speed) float64 { return s.DecodeTPS }
	prefill := func(s harness.Speed) float64 { return s.PrefillTPS }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "slice\tlayers\tMB/token\tdecode tok/s\t(range)\tprefill tok/s\t(range)\t")
	for i, row := range []struct {
		layers     int64
		bytes      int64
		dec, pre   float64
		decR, preR string
	}{
		{e.SmallLayers, e.SmallBytes, e.SmallDecodeTPS, e.SmallPrefillTPS, rangeOf(runs[0], decode), rangeOf(runs[0], prefill)},
		{e.LargeLayers, e.LargeBytes, e.LargeDecodeTPS, e.LargePrefillTPS, rangeOf(runs[1], decode), rangeOf(runs[1], prefill)},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f\t%s\t%.3f\t%s\t\n", filepath.Base(paths[i]), row.layers, float64(row.bytes)/1e6, row.dec, row.decR, row.pre, row.preR)
	}
	tw.Flush()
	fmt.Fprintf(w, "(medians of %d runs each, the slices alternating; prefill of %d tokens)\n", len(runs[0]), e.PrefillTokens)
	fmt.Fprintf(w, "a layer adds %.3f ms to a decode step and %.3f ms to a prompt token's prefill (the %d-layer slice's layers %d..%d over the %d-layer one)\n\n",
		e.DecodeMsPerLayer, e.PrefillMsPerLayer, e.LargeLayers, e.SmallLayers, e.LargeLayers-1, e.SmallLayers)
	fmt.Fprintf(w, "projected to %d layers: %.2f MB of weights a decode step, %.1f int8 (%.1f of them Q8_0) and %.1f float MMAC a prompt token\n",
		e.ProjectedLayers, float64(e.Bytes)/1e6, float64(e.PrefillMACsInt8)/1e6, float64(e.PrefillMACsQ8_0)/1e6, float64(e.PrefillMACsFloat)/1e6)
	pairs := int64(len(runs[0]))
	fmt.Fprintf(w, "  decode:  %.3f tok/s = %.3f of the speed of light (%.3f tok/s at %.2f GB/s%s)\n", e.DecodeTPS, e.DecodeFraction, e.DecodeLimitTPS, mc.ReadGBsAll,
		ciText(pairs, e.DecodeFractionCILo, e.DecodeFractionCIHi, "; pairs' ", ""))
	fmt.Fprintf(w, "  prefill: %.3f tok/s = %.3f of the compute limit (%.3f tok/s at the AVX2 int8-dot peak%s)", e.PrefillTPS, e.PrefillFraction, e.PrefillLimitTPS,
		ciText(pairs, e.PrefillFractionCILo, e.PrefillFractionCIHi, "; pairs' ", ""))
	if e.PrefillLimitMixTPS > 0 {
		fmt.Fprintf(w, ", %.3f of the avx2 mix limit%s", e.PrefillFractionMix, ciText(pairs, e.PrefillFractionMixCILo, e.PrefillFractionMixCIHi, " (pairs' ", ")"))
	}
	if e.PrefillLimitVNNITPS > 0 {
		fmt.Fprintf(w, ", %.3f of the VNNI one%s", e.PrefillFractionVNNI, ciText(pairs, e.PrefillFractionVNNICILo, e.PrefillFractionVNNICIHi, " (pairs' ", ")"))
	}
	fmt.Fprintln(w)
}
