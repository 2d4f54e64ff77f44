package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
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

// comparison is the result for one case.
type comparison struct {
	id    string
	m     vectors.Metrics
	stats []vectors.PositionStat
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
		return usageError{err}
	}
	if fs.NArg() != 2 {
		return usageError{errors.New("compare: give REF and RUN (raw float32 logits with --vocab, or JSON dumps / directories of them)")}
	}
	ref, run := fs.Arg(0), fs.Arg(1)
	for _, p := range []string{ref, run} {
		if err := checkArgFile(p); err != nil {
			return usageError{fmt.Errorf("compare: %w", err)}
		}
	}
	if *vocab < 0 {
		return usageError{fmt.Errorf("compare: %w", cli.FlagError(fs, "vocab", "must be at least 1"))}
	}
	for _, out := range []struct{ name, path string }{{"hist", *hist}, {"positions", *positions}} {
		if err := cli.OutputFile(out.name, out.path); err != nil {
			return usageError{fmt.Errorf("compare: %w", err)}
		}
	}
	var cmps []comparison
	if isDumps(ref) && isDumps(run) {
		var err error
		if cmps, err = compareDumps(ref, run); err != nil {
			return err
		}
	} else {
		if *vocab <= 0 {
			return usageError{errors.New("compare: raw float32 runs need --vocab N")}
		}
		a, err := vectors.ReadLogits(ref, *vocab)
		if err != nil {
			return err
		}
		b, err := vectors.ReadLogits(run, *vocab)
		if err != nil {
			return err
		}
		m, stats, err := vectors.CompareTargets(a, b, *vocab, nil)
		if err != nil {
			return err
		}
		cmps = []comparison{{id: stem(run), m: m, stats: stats}}
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpositions\tmean KL\tmedian KL\tp99 KL\tmax KL\tsame top-1\tRMS Δp\tNLL ratio\t")
	var all []vectors.PositionStat
	var series []plots.KLSeries
	for _, c := range cmps {
		printMetrics(tw, c.id, c.m)
		all = append(all, c.stats...)
		s := plots.KLSeries{Label: c.id}
		for _, st := range c.stats {
			s.KL = append(s.KL, st.KL)
		}
		series = append(series, s)
	}
	if len(cmps) > 1 {
		printMetrics(tw, "all", vectors.Summarize(all))
	}
	tw.Flush()

	t := *title
	if t == "" {
		t = stem(run) + " vs " + stem(ref)
	}
	if *hist != "" {
		ch, err := plots.KLHistogram(series, plots.KLOptions{Title: t})
		if err != nil {
			return err
		}
		if err := ch.Save(*hist); err != nil {
			return err
		}
	}
	if *positions != "" {
		ch, err := plots.KLPositions(series, plots.KLOptions{Title: t})
		if err != nil {
			return err
		}
		if err := ch.Save(*positions); err != nil {
			return err
		}
	}
	if *parquetDir != "" {
		meta, err := harness.CollectMeta(harness.MetaOptions{Tool: "ds4-vectors compare", Backend: "none", Args: append([]string{"ds4-vectors", "compare"}, args...)})
		if err != nil {
			return err
		}
		meta.ModelFile, meta.ModelName = run, stem(run)
		var recs []CompareRecord
		for _, c := range cmps {
			for _, s := range c.stats {
				recs = append(recs, CompareRecord{RunMeta: meta, Ref: ref, Run: run, CaseID: c.id, Position: int64(s.Position),
					KL: s.KL, DeltaP: s.DeltaP, SameTop1: s.SameTop1, RefTop: int64(s.RefTop), RunTop: int64(s.RunTop),
					Target: int64(s.Target), NLLRef: s.NLLRef, NLLRun: s.NLLRun})
			}
		}
		path, err := harness.WriteRun(*parquetDir, "compare", meta, recs)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", path)
	}
	return nil
}

func printMetrics(w io.Writer, id string, m vectors.Metrics) {
	fmt.Fprintf(w, "%s\t%d\t%.3g\t%.3g\t%.3g\t%.3g\t%.1f%%\t%.4f\t%.4f\t\n",
		id, m.Positions, m.MeanKL, m.MedianKL, m.P99KL, m.MaxKL, 100*m.Top1, m.RMSDeltaP, m.NLLRatio)
}

// isDumps reports whether path is a JSON dump or a directory.
func isDumps(path string) bool {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return true
	}
	return strings.EqualFold(filepath.Ext(path), ".json")
}

// compareDumps compares saved runs case by case: two files directly, two
// directories on the cases both hold.
func compareDumps(ref, run string) ([]comparison, error) {
	a, err := vectors.ReadDumps(ref)
	if err != nil {
		return nil, err
	}
	b, err := vectors.ReadDumps(run)
	if err != nil {
		return nil, err
	}
	if len(a) == 1 && len(b) == 1 {
		for ka, da := range a {
			for _, db := range b {
				a, b = map[string]vectors.Dump{ka: da}, map[string]vectors.Dump{ka: db}
			}
		}
	}
	var ids []string
	for id := range a {
		if _, ok := b[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("compare: %s and %s have no case in common", ref, run)
	}
	sort.Strings(ids)
	var out []comparison
	for _, id := range ids {
		sa, sb := a[id].StepList(), b[id].StepList()
		n := min(len(sa), len(sb))
		m, stats, err := vectors.CompareSteps(sa[:n], sb[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, comparison{id: id, m: m, stats: stats})
	}
	return out, nil
}

func stem(path string) string {
	path = strings.TrimRight(path, string(filepath.Separator))
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
