// Command ds4 runs DeepSeek V4 models from the terminal.
//
//	ds4 -p "prompt" [-m FILE] [-n N] [--temp T] [--nothink] [--ctx N] [--trace FILE]
//	ds4 [-m FILE] [-n N] [--temp T] [--nothink] [--ctx N] [--trace FILE]   (interactive chat)
//	ds4 tokenize [--chat] [--think|--nothink] [TEXT | -f FILE]   (stdin without either)
//	ds4 detokenize [IDS_JSON | -f FILE]
//
// With no -p or --prompt-file, ds4 runs an interactive chat: each line is
// a user message and the answer streams back, -n capping each answer. The
// conversation is kept as a token transcript and only the tokens the
// session has not evaluated yet are prefilled each turn. Commands: /help,
// /think, /think-max, /nothink, /ctx N, /read FILE, /quit and /exit; a
// line holding only """ starts a multi-line message that a second such
// line sends. Ctrl+C stops an answer (one stopped before its first token
// is forgotten, the session rewound to before it where upstream starts
// over) and Ctrl+D leaves. On a terminal the line is editable,
// with the history of ~/.ds4_history (the last 512 lines, saved after
// each one).
//
// --trace FILE writes a timestamped log of every prompt and generated
// token (see tracer).
//
// With no -m and no ./ds4flash.gguf it runs the built-in tiny synthetic
// model (random weights), so every command works with no download.
//
// Upstream's spellings work (-temp, -sys: see internal/cli). Deviations
// from upstream: of upstream's flags that this build lacks, --power,
// --quality, --prefill-chunk and the SSD-streaming flags are accepted with
// a notice, and --mtp*, --metal, --cuda, --inspect, --dump-tokens,
// --dump-logits, --expert-profile, the engine tests and --server are
// refused (exit status 2). The whole command line, files included, is
// checked before the model is loaded.
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
	return runWith(args, stdin, stdout, stderr, defaultHooks())
}

// runWith is run with the chat's interrupt source and test hooks.
func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer, h replHooks) int {
	var err error
	name := "ds4"
	switch {
	case len(args) > 0 && args[0] == "tokenize":
		name, err = "ds4 tokenize", runTokenize(args[1:], stdin, stdout, stderr)
	case len(args) > 0 && args[0] == "detokenize":
		name, err = "ds4 detokenize", runDetokenize(args[1:], stdin, stdout, stderr)
	default:
		err = runGenerate(args, stdin, stdout, stderr, h)
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
