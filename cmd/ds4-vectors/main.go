// Command ds4-vectors compares the engine against reference vectors.
//
//	ds4-vectors oracle [--mode lossless,q2] CASE_DIR...
//
// converts each oracle case (a checkpoint in the official format with the
// logits DeepSeek's reference computed), runs the prefill, decode and mixed
// paths, prints max |Δlogit|, KL statistics and top-1 agreement per case,
// mode and path, and exits with status 1 when a bar is missed.
//
//	ds4-vectors official [-m MODEL | --endpoint URL] [--vec FILE] [--only ID,...]
//
// runs upstream's official logprob vectors (greedy, thinking off, each
// case's context) on a real model (-m, $DS4_MODEL or ./ds4flash.gguf) or
// on an OpenAI-compatible server, applies upstream's acceptance rule
// (byte-identical greedy tokens; every official top token within the local
// top 20 and 4 nats), prints a table and exits with status 1 on a failure.
// --dump DIR saves each case's steps as JSON and --save-logits DIR its
// full logits, for compare; --parquet DIR writes the table as Parquet.
//
//	ds4-vectors compare [--vocab N] REF RUN
//
// compares two saved runs (raw float32 logits, or JSON dumps / directories
// of them) with the quantization metrics: mean, median, p99 and max KL
// divergence, same-top-1 rate, RMS Δp and NLL ratio; --hist and
// --positions draw the KL histogram and per-position chart.
//
//	ds4-vectors manifest [-m MODEL] [--prompts prompts.jsonl] --out DIR
//	ds4-vectors score [-m MODEL] [--ctx 4096] MANIFEST.tsv OUT.tsv
//	ds4-vectors compare-scores OLD.tsv NEW.tsv
//
// are upstream's official-continuation quality test: manifest writes a
// reference model's greedy continuations of the quality prompts (the
// local stand-in for the official ones, which need an API key), score
// measures a model's teacher-forced NLL, first-token match and greedy LCP
// on them, and compare-scores sets two scored runs side by side.
//
//	ds4-vectors study [--recipes q2,q4] [--svg FILE] [--parquet DIR] CASE_DIR...
//
// quantizes each oracle case with each recipe, without and with an
// imatrix collected from the quality prompts on its lossless conversion,
// and prints the mean KL and same-top-1 rate against the references.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/checkpoint"
	"github.com/ds4-go/ds4/internal/cli"
	"github.com/ds4-go/ds4/vectors"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: ds4-vectors oracle [--mode lossless,q2] [--threads N] CASE_DIR...
       ds4-vectors official [-m MODEL | --endpoint URL] [--vec FILE] [--dump DIR] [--save-logits DIR] [--parquet DIR]
       ds4-vectors compare [--vocab N] [--parquet DIR] [--hist FILE] [--positions FILE] REF RUN
       ds4-vectors manifest [-m MODEL] [--prompts FILE] [--count N] [--max-tokens N] --out DIR
       ds4-vectors score [-m MODEL] [--ctx N] [--parquet DIR] MANIFEST.tsv OUT.tsv
       ds4-vectors compare-scores [--parquet DIR] OLD.tsv NEW.tsv
       ds4-vectors study [--recipes q2,q4] [--prompts FILE] [--parquet DIR] [--svg FILE] CASE_DIR...
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "oracle":
		return runOracle(args, stdout, stderr)
	case "official":
		return status(runOfficial(args[1:], stdout, stderr), stderr)
	case "compare":
		return status(runCompare(args[1:], stdout, stderr), stderr)
	case "score":
		return status(runScore(args[1:], stdout, stderr), stderr)
	case "compare-scores":
		return status(runCompareScores(args[1:], stdout, stderr), stderr)
	case "manifest":
		return status(runManifest(args[1:], stdout, stderr), stderr)
	case "study":
		return status(runStudy(args[1:], stdout, stderr), stderr)
	}
	fmt.Fprint(stderr, usage)
	return 2
}

// usageError marks mistakes in the command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// errFailed reports failed cases that were already printed (exit 1).
var errFailed = errors.New("failed")

// status prints err and maps it to an exit status.
func status(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errFailed):
		return 1
	}
	fmt.Fprintf(stderr, "ds4-vectors: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func runOracle(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("oracle", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	modes := fs.StringSlice("mode", []string{"lossless"}, "conversions to run: lossless, f32, q2, q4 (quantized ones are reported, not bounded)")
	threads := fs.Int("threads", 0, "worker threads (0: one per CPU)")
	if err := cli.Parse(fs, args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var ms []checkpoint.Mode
	for _, s := range *modes {
		m, err := checkpoint.ParseMode(s)
		if err != nil {
			return status(usageError{fmt.Errorf("oracle: --mode %s: %w", s, err)}, stderr)
		}
		ms = append(ms, m)
	}
	if *threads < 0 {
		return status(usageError{fmt.Errorf("oracle: %w", cli.FlagError(fs, "threads", "must be at least 0 (0: one thread per CPU)"))}, stderr)
	}
	for _, dir := range fs.Args() {
		if err := checkCaseDir(dir); err != nil {
			return status(usageError{fmt.Errorf("oracle: %w", err)}, stderr)
		}
	}
	// Every case loads before the table starts: nothing is printed after
	// an error.
	cases, err := vectors.LoadOracles(fs.Args())
	if err != nil {
		return status(fmt.Errorf("oracle: %w", err), stderr)
	}
	be := cpu.New(*threads)
	defer be.Close()
	failed, err := oracleTable(stdout, stderr, cases, ms, be)
	if err != nil {
		return status(err, stderr)
	}
	if failed {
		return 1
	}
	return 0
}

// oracleTable runs each of cases in each of modes on be and prints a
// table line per path; it reports whether a bar was missed, each miss
// told on stderr.
func oracleTable(stdout, stderr io.Writer, cases []*vectors.OracleCase, modes []checkpoint.Mode, be *cpu.Backend) (failed bool, err error) {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	fmt.Fprintln(tw, "case\tmode\tpath\tmax|Δ|\tmean KL\tmedian KL\tp90 KL\tmax KL\ttop-1\t\tofficial mean KL\tmax KL\ttop-1\tbars\t")
	for _, c := range cases {
		for _, m := range modes {
			res, err := vectors.RunOracle(c, m, be)
			if err != nil {
				return failed, fmt.Errorf("oracle: %s %s: %w", c.Name, m, err)
			}
			verdict, err := res.Verdict()
			if err != nil {
				failed = true
				fmt.Fprintf(stderr, "ds4-vectors: %v\n", err)
			}
			for _, p := range res.Paths {
				a, b := p.VsF32Ref, p.VsOfficial
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2e\t%.2e\t%.2e\t%.2e\t%.2e\t%.1f%%\t\t%.3f\t%.3f\t%.1f%%\t%s\t\n",
					c.Name, m, p.Path, a.MaxAbsDelta, a.MeanKL, a.MedianKL, a.P90KL, a.MaxKL, 100*a.Top1, b.MeanKL, b.MaxKL, 100*b.Top1, verdict)
			}
			if names := res.FallbackTensors(); len(names) > 0 {
				fmt.Fprintf(stderr, "%s %s: %d tensors stored in a fallback type (%s…)\n", c.Name, m, len(names), strings.Join(names[:min(3, len(names))], ", "))
			}
		}
	}
	return failed, nil
}

// checkCaseDir checks that the oracle case directory dir exists.
func checkCaseDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("CASE_DIR %s: no such directory", dir)
	case err != nil:
		return fmt.Errorf("CASE_DIR %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("CASE_DIR %s: not a directory", dir)
	}
	return nil
}

// checkArgFile checks that the file or directory of a positional argument
// exists.
func checkArgFile(path string) error {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return fmt.Errorf("%s: no such file or directory", path)
	} else if err != nil {
		return err
	}
	return nil
}

// checkOutArg checks that the output file of the positional argument name
// can be created in an existing directory.
func checkOutArg(name, path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s %s: no such directory %s", name, path, dir)
	}
	return nil
}
