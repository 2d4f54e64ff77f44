// Command ds4-steer builds directional steering vectors and sweeps their
// effect (spec/harness.md §11).
//
// Usage:
//
//	ds4-steer build --good FILE --bad FILE [--out PATH] [--component ffn_out|attn_out]
//	          [--think] [--pair-normalize] [--no-orthogonalize] [--system TEXT] [--ctx N] [-m FILE]
//	ds4-steer sweep --direction FILE --prompts FILE [--scales -2,-1,-0.5,0,0.5,1,2]
//	          [--tokens N] [--ctx N] [--attn-scale F] [--nothink] [-m FILE]
//	          [--parquet DIR] [--svg FILE]
//
// build renders each prompt as BOS + system + <｜User｜> + prompt +
// <｜Assistant｜> + </think> (or <think> with --think), prefills it,
// captures every layer's last-token sublayer output and writes the
// normalized contrast direction as <stem>.f32 plus <stem>.json.
//
// sweep generates greedily for every prompt and FFN scale and reports the
// output length in tokens and the KL divergence of the first next-token
// distribution from the unsteered run; --parquet writes the rows under
// DIR/steering/model=<name>/date=<day>/<run>.parquet and --svg draws the
// mean effect against the scale. With no -m and no ./ds4flash.gguf both use
// the built-in tiny synthetic model.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/internal/cli"
)

// defaultModel is the GGUF ds4-steer looks for when -m is not given.
const defaultModel = engine.DefaultModel

// defaultSystem is the system prompt of upstream's build_direction.py.
const defaultSystem = "You are a helpful assistant."

const usage = `usage: ds4-steer build --good FILE --bad FILE [--out PATH] [flags]
       ds4-steer sweep --direction FILE --prompts FILE [--scales LIST] [flags]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = runBuild(args[1:], stdout, stderr)
	case "sweep":
		err = runSweep(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ds4-steer: unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ds4-steer %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "ds4-steer %s: %v\n", args[0], err)
		return 1
	}
}

// usageError marks mistakes in the command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// parse parses a subcommand's flags, turning parse errors into usage
// errors.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := cli.Parse(fs, args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// checkCommon checks the model, context and thread flags shared by the
// subcommands before anything is loaded.
func checkCommon(fs *pflag.FlagSet, model string, ctx, threads int) error {
	if err := cli.Context(fs, "ctx", ctx); err != nil {
		return err
	}
	if threads < 0 {
		return cli.FlagError(fs, "threads", "must be at least 0 (0: one thread per CPU)")
	}
	return cli.InputFile("model", model)
}

// openModel opens path, ./ds4flash.gguf, or the built-in tiny model, and
// returns the model with the absolute path it came from ("" for the tiny
// model).
func openModel(path string, stderr io.Writer) (*engine.Model, string, error) {
	m, opened, err := engine.OpenDefault(path)
	if err != nil {
		return nil, "", err
	}
	if opened == "" {
		fmt.Fprintf(stderr, "ds4-steer: no -m and no ./%s: using the built-in tiny synthetic model\n", defaultModel)
		return m, "", nil
	}
	abs, err := filepath.Abs(opened)
	if err != nil {
		return nil, "", fmt.Errorf("model path: %w", err)
	}
	return m, abs, nil
}
