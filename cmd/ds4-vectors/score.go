package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
)

// defaultPromptFiles are the quality prompt sets tried in order when
// --prompts is not given: upstream's path, then the repository's copy.
func defaultPromptFiles() []string {
	return []string{"gguf-tools/quality-testing/prompts.jsonl", "harness/testdata/quality/prompts.jsonl"}
}

// promptFile returns path, or the first default prompt set that exists.
func promptFile(path string) (string, error) {
	if path != "" {
		if err := cli.InputFile("prompts", path); err != nil {
			return "", cli.Usage(err)
		}
		return path, nil
	}
	for _, p := range defaultPromptFiles() {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", cli.Usage(errors.New("no prompt set: give --prompts FILE (upstream's gguf-tools/quality-testing/prompts.jsonl)"))
}

// checkScoring checks the model, context and thread flags of the scoring
// commands before anything is loaded.
func checkScoring(fs *pflag.FlagSet, model string, ctx, threads int) error {
	switch max := layout.MaxContextLength(); {
	case ctx <= 0:
		return cli.FlagError(fs, "ctx", "must be at least 1")
	case ctx > max:
		return cli.FlagError(fs, "ctx", "must be at most %d, the DS4 context length", max)
	}
	if err := cli.Threads(fs, threads); err != nil {
		return err
	}
	return cli.InputFile("model", model)
}

// runScore is upstream's score_official: teacher-forced NLL, first-token
// match and greedy LCP of each manifest case, written as TSV.
func runScore(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("score", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.StringP("model", "m", "", cli.ModelUsage)
	ctx := fs.Int("ctx", 4096, "session context in tokens (at least 1024)")
	threads := fs.IntP("threads", "t", 0, cli.ThreadsUsage)
	parquetDir := fs.String("parquet", "", "also write the rows as Parquet under DIR (hive-style partitions)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return cli.Usage(errors.New("score: give MANIFEST.tsv and OUT.tsv"))
	}
	if err := checkScoring(fs, *model, *ctx, *threads); err != nil {
		return cli.Usage(fmt.Errorf("score: %w", err))
	}
	manifest, outPath := fs.Arg(0), fs.Arg(1)
	if err := checkOutArg("OUT.tsv", outPath); err != nil {
		return cli.Usage(fmt.Errorf("score: %w", err))
	}
	cases, err := harness.ReadManifest(manifest)
	if err != nil {
		return err
	}
	m, opened, err := cli.OpenModel(*model, false, "ds4-vectors", stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	f, err := os.Create(outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	if _, err := w.WriteString(harness.ScoreHeader); err != nil {
		return err
	}
	be := cpu.New(*threads)
	defer be.Close()
	var meta harness.RunMeta // collected at the start, so started_at is the start
	if *parquetDir != "" {
		if meta, err = harness.CollectMeta(harness.MetaOptions{Tool: "ds4-vectors score", ModelPath: opened, Model: m, Backend: "cpu",
			Threads: be.Workers(), Hash: harness.HashQuick, Args: append([]string{"ds4-vectors", "score"}, args...)}); err != nil {
			return err
		}
	}
	var line []byte
	rows, err := harness.ScoreCases(m, be, tok, cases, harness.ScoreOptions{Context: *ctx, Log: stderr, Row: func(r harness.ScoreRow) error {
		line = harness.AppendScoreTSV(line[:0], r)
		if _, err := w.Write(line); err != nil {
			return err
		}
		return w.Flush() // a row is on disk as soon as it is scored, as upstream's
	}})
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, harness.SummarizeScores(rows))
	if *parquetDir != "" {
		path, err := harness.WriteQualityRun(*parquetDir, meta, manifest, rows)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", path)
	}
	return nil
}

// runCompareScores is upstream's compare_scores.py: two scored runs side
// by side on their common cases.
func runCompareScores(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare-scores", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	parquetDir := fs.String("parquet", "", "also write the joined rows as Parquet under DIR (hive-style partitions)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return cli.Usage(errors.New("compare-scores: give OLD.tsv and NEW.tsv"))
	}
	oldPath, newPath := fs.Arg(0), fs.Arg(1)
	for _, p := range []string{oldPath, newPath} {
		if err := checkArgFile(p); err != nil {
			return cli.Usage(fmt.Errorf("compare-scores: %w", err))
		}
	}
	old, err := harness.ReadScoresFile(oldPath)
	if err != nil {
		return err
	}
	nw, err := harness.ReadScoresFile(newPath)
	if err != nil {
		return err
	}
	c, err := harness.CompareScores(old, nw)
	if err != nil {
		return err
	}
	if err := c.WriteText(stdout); err != nil {
		return err
	}
	if *parquetDir != "" {
		meta, err := harness.CollectMeta(harness.MetaOptions{Tool: "ds4-vectors compare-scores", Backend: "none",
			Args: append([]string{"ds4-vectors", "compare-scores"}, args...)})
		if err != nil {
			return err
		}
		meta.ModelFile, meta.ModelName = newPath, stem(newPath)
		path, err := harness.WriteQualityCompareRun(*parquetDir, meta, oldPath, newPath, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "ds4-vectors: wrote %s\n", path)
	}
	return nil
}

// runManifest is the local stand-in for upstream's collect_official.py:
// a reference model's greedy continuations of the quality prompts, as a
// manifest the scorer reads.
func runManifest(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("manifest", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.StringP("model", "m", "", "reference model GGUF (default ./ds4flash.gguf, else the built-in tiny model)")
	prompts := fs.String("prompts", "", "prompt set, JSON Lines with a \"prompt\" per line (default upstream's gguf-tools/quality-testing/prompts.jsonl, then harness/testdata/quality/prompts.jsonl)")
	out := fs.StringP("out", "o", "", "output directory (manifest.tsv, prompts/, continuations/, responses/)")
	count := fs.Int("count", 100, "prompts to use (the first N)")
	maxTokens := fs.Int("max-tokens", 24, "greedy tokens per continuation")
	ctx := fs.Int("ctx", 4096, "session context in tokens")
	threads := fs.IntP("threads", "t", 0, cli.ThreadsUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *out == "" {
		return cli.Usage(errors.New("manifest: give --out DIR and no arguments"))
	}
	switch {
	case *count <= 0:
		return cli.Usage(fmt.Errorf("manifest: %w", cli.FlagError(fs, "count", "must be at least 1")))
	case *maxTokens <= 0:
		return cli.Usage(fmt.Errorf("manifest: %w", cli.FlagError(fs, "max-tokens", "must be at least 1")))
	}
	if err := checkScoring(fs, *model, *ctx, *threads); err != nil {
		return cli.Usage(fmt.Errorf("manifest: %w", err))
	}
	if st, err := os.Stat(*out); err == nil && !st.IsDir() {
		return cli.Usage(fmt.Errorf("manifest: %w", cli.FlagError(fs, "out", "is a file, not a directory")))
	}
	path, err := promptFile(*prompts)
	if err != nil {
		return err
	}
	ps, err := harness.ReadPromptsJSONL(path)
	if err != nil {
		return err
	}
	ps = ps[:min(*count, len(ps))]
	m, _, err := cli.OpenModel(*model, false, "ds4-vectors", stderr)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	be := cpu.New(*threads)
	defer be.Close()
	manifest, err := harness.WriteReferenceManifest(*out, m, be, tok, ps, harness.ReferenceOptions{MaxTokens: *maxTokens, Context: *ctx, Log: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, manifest)
	return nil
}
