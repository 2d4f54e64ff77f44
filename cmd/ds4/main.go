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
	"io"
	"os"

	"github.com/ds4-go/ds4/internal/cli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes a command line and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(args, stdin, stdout, stderr, defaultHooks())
}

// runWith is run with the chat's interrupt source and test hooks.
func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer, h replHooks) int {
	return cli.Main(command(stdin, stdout, stderr, h), args, stdout, stderr)
}

// command describes ds4 and its subcommands.
func command(stdin io.Reader, stdout, stderr io.Writer, h replHooks) cli.Command {
	return cli.Command{
		Name:     "ds4",
		Synopsis: []string{"[flags] -p PROMPT", "[flags]   (interactive chat)", "COMMAND [flags]"},
		Doc: `Runs DeepSeek V4 models from the terminal. With -p or --prompt-file it
answers one prompt; with neither it runs an interactive chat: each line
is a user message and the answer streams back, -n capping each answer.
Chat commands: /help, /think, /think-max, /nothink, /ctx N, /read FILE,
/quit and /exit; a line holding only """ starts a multi-line message that
a second such line sends. Ctrl+C stops an answer and Ctrl+D leaves.

With no -m and no ./` + defaultModel + ` it runs the built-in tiny synthetic
model (random weights). Upstream's single-dash spellings work (-temp 0,
-sys TEXT).`,
		Run: func(args []string) error { return runGenerate(args, stdin, stdout, stderr, h) },
		Commands: []cli.Command{{
			Name:     "ds4 tokenize",
			Synopsis: []string{"[flags] [TEXT | -f FILE]"},
			Summary:  "print the token ids of TEXT, FILE or stdin as JSON",
			Run:      func(args []string) error { return runTokenize(args, stdin, stdout, stderr) },
		}, {
			Name:     "ds4 detokenize",
			Synopsis: []string{"[flags] [IDS_JSON | -f FILE]"},
			Summary:  "print the text of a JSON array of token ids",
			Run:      func(args []string) error { return runDetokenize(args, stdin, stdout, stderr) },
		}},
	}
}
