package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/plots"
)

// runStudy is the quality study: each oracle case quantized with each
// recipe, without and with an imatrix collected from the quality prompts
// on the case's lossless conversion, measured against the reference
// logits.
func runStudy(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("study", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	recipes := fs.StringSlice("recipes", []string{"q2", "q4"}, "quantized conversions to study")
	prompts := fs.String("prompts", "", "calibration prompts, JSON Lines with a \"prompt\" per line (default upstream's gguf-tools/quality-testing/prompts.jsonl, then harness/testdata/quality/prompts.jsonl)")
	holdout := fs.Int("holdout", 2, "hold out every Nth prompt (the 2nd, 4th, … for 2) from calibration and compare every conversion with the lossless one on them (0: calibrate on all)")
	maxPrompts := fs.Int("max-prompts", 0, "calibration prompts to use (0: all)")
	maxTokens := fs.Int("max-tokens", 0, "calibration tokens to use over all prompts (0: all)")
	threads := fs.IntP("threads", "t", 0, "CPU worker threads (0: one per CPU)")
	parquetDir := fs.String("parquet", "", "write every measurement as Parquet under DIR (hive-style partitions)")
	chart := fs.String("svg", "", "draw the prefill mean KL and same-top-1 per case and recipe to FILE (.svg or .png)")
	reference := fs.String("reference", "f32ref", "reference the chart shows: f32ref or official")
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return cli.Usage(err)
	}
	if fs.NArg() == 0 {
		return cli.Usage(errors.New("study: give oracle CASE_DIR..."))
	}
	for _, v := range []struct {
		name string
		bad  bool
		want string
	}{
		{"max-prompts", *maxPrompts < 0, "must be at least 0 (0: all)"},
		{"max-tokens", *maxTokens < 0, "must be at least 0 (0: all)"},
		{"threads", *threads < 0, "must be at least 0 (0: one thread per CPU)"},
		{"holdout", *holdout < 0 || *holdout == 1, "must be 0 or at least 2"},
		{"reference", *reference != "f32ref" && *reference != "official", "must be f32ref or official"},
	} {
		if v.bad {
			return cli.Usage(fmt.Errorf("study: %w", cli.FlagError(fs, v.name, "%s", v.want)))
		}
	}
	for _, dir := range fs.Args() {
		if err := checkCaseDir(dir); err != nil {
			return cli.Usage(fmt.Errorf("study: %w", err))
		}
	}
	if err := cli.OutputFile("svg", *chart); err != nil {
		return cli.Usage(fmt.Errorf("study: %w", err))
	}
	modes, err := harness.ParseStudyRecipes(*recipes)
	if err != nil {
		return cli.Usage(fmt.Errorf("study: %w", err))
	}
	path, calib, heldout, err := studyPrompts(*prompts, *holdout)
	if err != nil {
		return err
	}
	be := cpu.New(*threads)
	defer be.Close()
	meta, err := harness.CollectMeta(harness.MetaOptions{Tool: "ds4-vectors study", Backend: "cpu", Threads: be.Workers(),
		Args: append([]string{"ds4-vectors", "study"}, args...)})
	if err != nil {
		return err
	}
	rows, err := harness.RunStudy(fs.Args(), be, harness.StudyOptions{Recipes: modes, Prompts: calib, Heldout: heldout,
		Imatrix: harness.ImatrixOptions{MaxPrompts: *maxPrompts, MaxTokens: *maxTokens, Dataset: path}, Log: stderr})
	if err != nil {
		return err
	}
	printStudy(stdout, rows)
	if *chart != "" {
		if err := drawStudy(*chart, *reference, rows); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", *chart)
	}
	if *parquetDir != "" {
		meta.ModelFile, meta.ModelName, meta.Notes = strings.Join(fs.Args(), ","), "oracle", "calibration: "+path
		return writeStudy(*parquetDir, meta, fs.Args(), rows, stderr)
	}
	return nil
}

// studyPrompts reads the prompts of --prompts (or the default set, whose
// path it returns) and splits them into calibration and held-out token
// sequences.
func studyPrompts(prompts string, holdout int) (path string, calib, heldout [][]int, err error) {
	if path, err = promptFile(prompts); err != nil {
		return "", nil, nil, err
	}
	ps, err := harness.ReadPromptsJSONL(path)
	if err != nil {
		return "", nil, nil, err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return "", nil, nil, err
	}
	calib, heldout = harness.SplitHoldout(tok, ps, holdout)
	return path, calib, heldout, nil
}

// drawStudy draws the prefill mean KL and same-top-1 of each case and
// quantized recipe of rows, against reference (f32ref or official), to
// path.
func drawStudy(path, reference string, rows []harness.StudyRow) error {
	var pts []plots.QualityPoint
	for _, c := range harness.SummarizeStudy(rows) {
		if c.Recipe == string(checkpoint.ModeLossless) {
			continue
		}
		pt := plots.QualityPoint{Group: c.Case + " " + c.Recipe, Series: "imatrix " + c.Imatrix, MeanKL: c.F32RefMeanKL, Top1: c.F32RefTop1}
		if reference == "official" {
			pt.MeanKL, pt.Top1 = c.OfficialMeanKL, c.OfficialTop1
		}
		pts = append(pts, pt)
	}
	ch, err := plots.QualityStudy(pts, plots.QualityOptions{Title: "Quantization quality on the oracle cases (prefill)", Reference: reference})
	if err != nil {
		return err
	}
	return ch.Save(path)
}

// writeStudy writes the study rows of the cases in caseDirs as Parquet
// under dir.
func writeStudy(dir string, meta harness.RunMeta, caseDirs []string, rows []harness.StudyRow, stderr io.Writer) error {
	var names []string
	for _, d := range caseDirs {
		names = append(names, filepath.Base(filepath.Clean(d)))
	}
	p, err := harness.WriteStudyRun(dir, meta, rows)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "ds4-vectors: wrote %s (cases %s)\n", p, strings.Join(names, ", "))
	return nil
}

// printStudy prints the prefill summary of a study and the imatrix's
// effect per case and recipe.
func printStudy(w io.Writer, rows []harness.StudyRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\trecipe\timatrix\tf32ref mean KL\tsame top-1\tofficial mean KL\tsame top-1\theld-out mean KL\tsame top-1\tgate/up error\tdown error\ttensors w/ imatrix\t")
	for _, c := range harness.SummarizeStudy(rows) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.4g\t%.1f%%\t%.4g\t%.1f%%\t%.4g\t%.1f%%\t%.4g\t%.3g\t%d\t\n", c.Case, c.Recipe, c.Imatrix,
			c.F32RefMeanKL, 100*c.F32RefTop1, c.OfficialMeanKL, 100*c.OfficialTop1, c.HeldoutMeanKL, 100*c.HeldoutTop1, c.GateUpRelErr, c.DownRelErr, c.ImatrixTensors)
	}
	tw.Flush()
	for _, e := range harness.ImatrixEffects(rows) {
		fmt.Fprintf(w, "imatrix effect %s %s: gate/up output error %+.1f%%; mean KL vs f32ref %+.1f%% (per position %+.3g ± %.2g, lower at %.0f%%); held-out mean KL %+.1f%% (%+.3g ± %.2g, lower at %.0f%%)\n",
			e.Case, e.Recipe, 100*e.GateUpChange, 100*e.KLChange, e.KLDeltaMean, e.KLDeltaSE, 100*e.Improved,
			100*e.HeldoutKLChange, e.HeldoutDeltaMean, e.HeldoutDeltaSE, 100*e.HeldoutImproved)
	}
}
