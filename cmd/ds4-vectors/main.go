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

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(stdout, stderr), args, stdout, stderr)
}

// command describes ds4-vectors and its subcommands.
func command(stdout, stderr io.Writer) cli.Command {
	wire := func(f func([]string, io.Writer, io.Writer) error) func([]string) error {
		return func(args []string) error { return f(args, stdout, stderr) }
	}
	return cli.Command{
		Name:     "ds4-vectors",
		Synopsis: []string{"COMMAND [flags]"},
		Doc:      "Compares the engine against reference vectors.",
		Commands: []cli.Command{{
			Name:     "ds4-vectors oracle",
			Synopsis: []string{"[--mode lossless,q2] [flags] CASE_DIR..."},
			Summary:  "run oracle cases against DeepSeek's reference logits",
			Doc: `Converts each oracle case (a checkpoint in the official format with the
logits DeepSeek's reference computed), runs the prefill, decode and mixed
paths, prints max |Δlogit|, KL statistics and top-1 agreement per case,
mode and path, and exits with status 1 when a bar is missed.`,
			Run: wire(runOracle),
		}, {
			Name:     "ds4-vectors official",
			Synopsis: []string{"[-m MODEL | --endpoint URL] [--vec FILE] [--only ID,...] [flags]"},
			Summary:  "run upstream's official logprob vectors on a model or a server",
			Doc: `Runs upstream's official logprob vectors (greedy, thinking off, each
case's context) on a real model (-m, $DS4_MODEL or ./ds4flash.gguf) or on
an OpenAI-compatible server, applies upstream's acceptance rule
(byte-identical greedy tokens; every official top token within the local
top 20 and 4 nats), prints a table and exits with status 1 on a failure.`,
			Run: wire(runOfficial),
		}, {
			Name:     "ds4-vectors compare",
			Synopsis: []string{"[--vocab N] [flags] REF RUN"},
			Summary:  "compare two saved runs with the quantization metrics",
			Doc: `Compares two saved runs (raw float32 logits, or JSON dumps / directories
of them): mean, median, p99 and max KL divergence, same-top-1 rate, RMS
Δp and NLL ratio.`,
			Run: wire(runCompare),
		}, {
			Name:     "ds4-vectors manifest",
			Synopsis: []string{"[-m MODEL] [--prompts FILE] [flags] --out DIR"},
			Summary:  "write a reference model's greedy continuations of the quality prompts",
			Run:      wire(runManifest),
		}, {
			Name:     "ds4-vectors score",
			Synopsis: []string{"[-m MODEL] [flags] MANIFEST.tsv OUT.tsv"},
			Summary:  "score a model's NLL, first-token match and greedy LCP on a manifest",
			Run:      wire(runScore),
		}, {
			Name:     "ds4-vectors compare-scores",
			Synopsis: []string{"[flags] OLD.tsv NEW.tsv"},
			Summary:  "set two scored runs side by side",
			Run:      wire(runCompareScores),
		}, {
			Name:     "ds4-vectors study",
			Synopsis: []string{"[--recipes q2,q4] [flags] CASE_DIR..."},
			Summary:  "measure quantization recipes with and without an imatrix",
			Doc: `Quantizes each oracle case with each recipe, without and with an imatrix
collected from the quality prompts on its lossless conversion, and prints
the mean KL and same-top-1 rate against the references.`,
			Run: wire(runStudy),
		}},
	}
}

func runOracle(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("oracle", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	modes := fs.StringSlice("mode", []string{"lossless"}, "conversions to run: lossless, f32, q2, q4 (quantized ones are reported, not bounded)")
	threads := fs.IntP("threads", "t", 0, cli.ThreadsUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usage(errors.New("oracle: give CASE_DIR..."))
	}
	var ms []checkpoint.Mode
	for _, s := range *modes {
		m, err := checkpoint.ParseMode(s)
		if err != nil {
			return cli.Usage(fmt.Errorf("oracle: --mode %s: %w", s, err))
		}
		ms = append(ms, m)
	}
	if err := cli.Threads(fs, *threads); err != nil {
		return cli.Usage(fmt.Errorf("oracle: %w", err))
	}
	for _, dir := range fs.Args() {
		if err := checkCaseDir(dir); err != nil {
			return cli.Usage(fmt.Errorf("oracle: %w", err))
		}
	}
	// Every case loads before the table starts: nothing is printed after
	// an error.
	cases, err := vectors.LoadOracles(fs.Args())
	if err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	be := cpu.New(*threads)
	defer be.Close()
	failed, err := oracleTable(stdout, stderr, cases, ms, be)
	if err != nil {
		return err
	}
	if failed {
		return cli.ErrReported
	}
	return nil
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
