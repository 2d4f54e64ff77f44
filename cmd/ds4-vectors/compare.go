package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/plots"
	"github.com/ds4-go/ds4/vectors"
)

// CompareRecord is one row of a comparison's Parquet file: one position
// of one case.
type CompareRecord struct {
	harness.RunMeta
	Ref      string  `parquet:"ref"`
	Run      string  `parquet:"run"`
	CaseID   string  `parquet:"case_id"`
	Position int64   `parquet:"position"`
	KL       float64 `parquet:"kl"`
	DeltaP   float64 `parquet:"delta_p"`
	SameTop1 bool    `parquet:"same_top1"`
	RefTop   int64   `parquet:"ref_top"`
	RunTop   int64   `parquet:"run_top"`
	Target   int64   `parquet:"target"`
	NLLRef   float64 `parquet:"nll_ref"`
	NLLRun   float64 `parquet:"nll_run"`
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	vocab := fs.Int("vocab", 0, "logits per row of raw float32 runs")
	parquetDir := fs.String("parquet", "", "write the per-position results as Parquet under DIR")
	hist := fs.String("hist", "", "draw the KL histogram to FILE (.svg or .png)")
	positions := fs.String("positions", "", "draw the per-position KL chart to FILE (.svg or .png)")
	title := fs.String("title", "", "chart title (default RUN vs REF)")
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if fs.NArg() != 2 {
		return cli.Usage(errors.New("compare: give REF and RUN (raw float32 logits with --vocab, or JSON dumps / directories of them)"))
	}
	ref, run := fs.Arg(0), fs.Arg(1)
	for _, p := range []string{ref, run} {
		if err := checkArgFile(p); err != nil {
			return cli.Usage(fmt.Errorf("compare: %w", err))
		}
	}
	if *vocab < 0 {
		return cli.Usage(fmt.Errorf("compare: %w", cli.FlagError(fs, "vocab", "must be at least 1")))
	}
	for _, out := range []struct{ name, path string }{{"hist", *hist}, {"positions", *positions}} {
		if err := cli.OutputFile(out.name, out.path); err != nil {
			return cli.Usage(fmt.Errorf("compare: %w", err))
		}
	}
	var cmps []vectors.CaseComparison
	var err error
	switch {
	case vectors.IsDumps(ref) && vectors.IsDumps(run):
		cmps, err = vectors.CompareDumps(ref, run)
	case *vocab <= 0:
		return cli.Usage(errors.New("compare: raw float32 runs need --vocab N"))
	default:
		cmps, err = vectors.CompareLogitFiles(ref, run, *vocab, stem(run))
	}
	if err != nil {
		return err
	}
	printComparisons(stdout, cmps)
	t := *title
	if t == "" {
		t = stem(run) + " vs " + stem(ref)
	}
	if err := drawComparisons(cmps, t, *hist, *positions); err != nil {
		return err
	}
	if *parquetDir != "" {
		return writeComparisons(*parquetDir, args, ref, run, cmps, stderr)
	}
	return nil
}

// printComparisons writes the table of cmps, a line per case and, with
// several, one over them all.
func printComparisons(w io.Writer, cmps []vectors.CaseComparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpositions\tmean KL\tmedian KL\tp99 KL\tmax KL\tsame top-1\tRMS Δp\tNLL ratio\t")
	for _, c := range cmps {
		printMetrics(tw, c.ID, c.Metrics)
	}
	if len(cmps) > 1 {
		printMetrics(tw, "all", vectors.SummarizeAll(cmps))
	}
	tw.Flush()
}

// drawComparisons draws the KL histogram of cmps to hist and their
// per-position chart to positions, where set.
func drawComparisons(cmps []vectors.CaseComparison, title, hist, positions string) error {
	var series []plots.KLSeries
	for _, c := range cmps {
		s := plots.KLSeries{Label: c.ID}
		for _, st := range c.Stats {
			s.KL = append(s.KL, st.KL)
		}
		series = append(series, s)
	}
	for _, chart := range []struct {
		path string
		draw func([]plots.KLSeries, plots.KLOptions) (*plots.Chart, error)
	}{{hist, plots.KLHistogram}, {positions, plots.KLPositions}} {
		if chart.path == "" {
			continue
		}
		ch, err := chart.draw(series, plots.KLOptions{Title: title})
		if err != nil {
			return err
		}
		if err := ch.Save(chart.path); err != nil {
			return err
		}
	}
	return nil
}

// writeComparisons writes the positions of cmps, the comparison of run
// with ref by the command line args, as Parquet under dir.
func writeComparisons(dir string, args []string, ref, run string, cmps []vectors.CaseComparison, stderr io.Writer) error {
	meta, err := harness.CollectMeta(harness.MetaOptions{Tool: "ds4-vectors compare", Backend: "none", Args: append([]string{"ds4-vectors", "compare"}, args...)})
	if err != nil {
		return err
	}
	meta.ModelFile, meta.ModelName = run, stem(run)
	var recs []CompareRecord
	for _, c := range cmps {
		for _, s := range c.Stats {
			recs = append(recs, CompareRecord{RunMeta: meta, Ref: ref, Run: run, CaseID: c.ID, Position: int64(s.Position),
				KL: s.KL, DeltaP: s.DeltaP, SameTop1: s.SameTop1, RefTop: int64(s.RefTop), RunTop: int64(s.RunTop),
				Target: int64(s.Target), NLLRef: s.NLLRef, NLLRun: s.NLLRun})
		}
	}
	path, err := harness.WriteRun(dir, "compare", meta, recs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", path)
	return nil
}

func printMetrics(w io.Writer, id string, m vectors.Metrics) {
	fmt.Fprintf(w, "%s\t%d\t%.3g\t%.3g\t%.3g\t%.3g\t%.1f%%\t%.4f\t%.4f\t\n",
		id, m.Positions, m.MeanKL, m.MedianKL, m.P99KL, m.MaxKL, 100*m.Top1, m.RMSDeltaP, m.NLLRatio)
}

func stem(path string) string {
	path = strings.TrimRight(path, string(filepath.Separator))
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
