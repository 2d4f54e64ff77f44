// Command ds4 runs DeepSeek V4 models from the terminal.
//
//	ds4 -p "prompt" [-m FILE] [-n N] [--temp T] [--nothink] [--ctx N]
//	ds4 tokenize [--chat] [--think|--nothink] [TEXT | -f FILE]   (stdin without either)
//	ds4 detokenize [IDS_JSON | -f FILE]
//
// With no -m and no ./ds4flash.gguf it runs the built-in tiny synthetic
// model (random weights), so every command works with no download.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError marks mistakes in the command line (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// run executes a command line and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	name := "ds4"
	switch {
	case len(args) > 0 && args[0] == "tokenize":
		name, err = "ds4 tokenize", runTokenize(args[1:], stdin, stdout, stderr)
	case len(args) > 0 && args[0] == "detokenize":
		name, err = "ds4 detokenize", runDetokenize(args[1:], stdin, stdout, stderr)
	default:
		err = runGenerate(args, stdout, stderr)
	}
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
