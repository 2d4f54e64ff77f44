// Command ds4-quant produces and examines DS4 GGUF files: synthetic models
// (synth), layout checks (inspect), raw block conversion (raw),
// quantization of checkpoints and GGUFs (quantize, alias convert) and the
// mixed-layer splice (splice).
package main

import (
	"io"
	"os"

	"github.com/ds4-go/ds4/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Main(command(stdout, stderr), args, stdout, stderr)
}

// command describes ds4-quant and its subcommands.
func command(stdout, stderr io.Writer) cli.Command {
	wire := func(f func([]string, io.Writer, io.Writer) error) func([]string) error {
		return func(args []string) error { return f(args, stdout, stderr) }
	}
	quantize := cli.Command{
		Name:     "ds4-quant quantize",
		Synopsis: []string{"--hf CHECKPOINT --out FILE [flags]", "--in MODEL.gguf --out FILE [flags]"},
		Summary:  "convert an official checkpoint (--hf) or requantize a DS4 GGUF (--in)",
		Doc: `Converts an official checkpoint (--hf) or requantizes a DS4 GGUF (--in)
to a recipe's types, optionally weighted by an imatrix.`,
		Run: wire(runQuantize),
	}
	convert := quantize
	convert.Name, convert.Summary = "ds4-quant convert", "the same command as quantize"
	return cli.Command{
		Name:     "ds4-quant",
		Synopsis: []string{"COMMAND [flags]"},
		Doc:      "Produces and examines DS4 GGUF files.",
		Commands: []cli.Command{{
			Name:     "ds4-quant synth",
			Synopsis: []string{"--out FILE [flags]"},
			Summary:  "write a synthetic DS4 model with seeded random weights",
			Run:      wire(runSynth),
		}, {
			Name:     "ds4-quant inspect",
			Synopsis: []string{"[flags] MODEL.gguf"},
			Summary:  "print a GGUF's metadata and tensors and check the DS4 layout",
			Run:      wire(runInspect),
		}, {
			Name:     "ds4-quant raw",
			Synopsis: []string{"--type T --cols N [--imatrix FILE] IN.f32 OUT.bin", "--dequant --type T --cols N IN.bin OUT.f32"},
			Summary:  "quantize a raw float32 matrix to ggml blocks, or --dequant back",
			Doc:      rawDoc,
			Run:      wire(runRaw),
		}, quantize, convert, {
			Name:     "ds4-quant splice",
			Synopsis: []string{"--base FILE --donor FILE --q4-layers SPEC --out FILE [flags]"},
			Summary:  "take the routed experts of chosen layers from a donor GGUF",
			Run:      wire(runSplice),
		}},
	}
}
