// Command ds4-quant produces and examines DS4 GGUF files: synthetic models
// (synth), layout checks (inspect), raw block conversion (raw),
// quantization of checkpoints and GGUFs (quantize, alias convert) and the
// mixed-layer splice (splice).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
)

const usage = `usage: ds4-quant <command> [flags]

commands:
  synth    write a synthetic DS4 model with seeded random weights
  inspect  print a GGUF's metadata and tensors and check the DS4 layout
  raw      quantize a raw float32 matrix to ggml blocks, or --dequant back
  quantize convert an official checkpoint (--hf) or requantize a DS4 GGUF (--in)
           to a recipe's types, optionally weighted by an imatrix
  convert  the same command as quantize
  splice   take the routed experts of chosen layers from a donor GGUF

Run 'ds4-quant <command> --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{
		"synth":    runSynth,
		"inspect":  runInspect,
		"raw":      runRaw,
		"quantize": runQuantize,
		"convert":  runQuantize,
		"splice":   runSplice,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "ds4-quant: unknown command %q\n%s", args[0], usage)
		return 2
	}
	err := cmd(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "ds4-quant %s: %v\n", args[0], err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError marks errors in the command line itself (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }
