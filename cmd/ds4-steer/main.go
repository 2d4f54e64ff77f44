// Command ds4-steer builds directional steering vectors and sweeps their
// effect (docs/steering.md).
//
//	ds4-steer build --good FILE --bad FILE [--out PATH] [flags]
//	ds4-steer sweep --direction FILE --prompts FILE [--scales LIST] [flags]
//
// Each command's --help lists its flags.
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
// the built-in tiny synthetic model. Deviation from upstream: the default
// system prompt is upstream ds4's CLI default, "You are a helpful
// assistant", where upstream's build_direction.py ends it with a period.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(stdout, stderr), args, stdout, stderr)
}

// command describes ds4-steer and its subcommands.
func command(stdout, stderr io.Writer) cli.Command {
	return cli.Command{
		Name:     "ds4-steer",
		Synopsis: []string{"COMMAND [flags]"},
		Doc:      "Builds directional steering vectors and sweeps their effect.",
		Commands: []cli.Command{{
			Name:     "ds4-steer build",
			Synopsis: []string{"--good FILE --bad FILE [--out PATH] [flags]"},
			Summary:  "build a steering direction from good and bad prompts",
			Doc: `Renders each prompt as BOS + system + <｜User｜> + prompt + <｜Assistant｜>
+ </think> (or <think> with --think), prefills it, captures every layer's
last-token sublayer output and writes the normalized contrast direction
as <stem>.f32 plus <stem>.json.`,
			Run: func(args []string) error { return runBuild(args, stdout, stderr) },
		}, {
			Name:     "ds4-steer sweep",
			Synopsis: []string{"--direction FILE --prompts FILE [--scales LIST] [flags]"},
			Summary:  "measure a direction's effect over a range of scales",
			Doc: `Generates greedily for every prompt and FFN scale and reports the output
length in tokens and the KL divergence of the first next-token
distribution from the unsteered run; --parquet writes the rows under
DIR/steering/model=<name>/date=<day>/<run>.parquet and --svg draws the
mean effect against the scale.`,
			Run: func(args []string) error { return runSweep(args, stdout, stderr) },
		}},
	}
}

// parse parses a subcommand's flags, turning parse errors into usage
// errors.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	return nil
}

// checkCommon checks the model, context and thread flags shared by the
// subcommands before anything is loaded.
func checkCommon(fs *pflag.FlagSet, model string, ctx, threads int) error {
	if err := cli.Context(fs, "ctx", ctx); err != nil {
		return err
	}
	if err := cli.Threads(fs, threads); err != nil {
		return err
	}
	return cli.InputFile("model", model)
}
