package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine/prompt"
	"github.com/ds4-go/ds4/engine/tokenizer"
	"github.com/ds4-go/ds4/internal/cli"
)

// readInput returns the text of the one positional argument, of --file, or
// of stdin when neither is given.
func readInput(fs *pflag.FlagSet, file string, stdin io.Reader) (string, error) {
	switch {
	case fs.NArg() > 1 || (fs.NArg() == 1 && file != ""):
		return "", cli.Usage(fmt.Errorf("give the input as one argument, --file, or on stdin"))
	case fs.NArg() == 1:
		return fs.Arg(0), nil
	case file != "":
		b, err := os.ReadFile(file)
		return string(b), err
	}
	b, err := io.ReadAll(stdin)
	return string(b), err
}

func runTokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("tokenize", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.StringP("file", "f", "", "read the text from FILE")
	chat := fs.Bool("chat", false, "render the text as one user message first, as the official API does (no system prompt); special-token text in it stays ordinary text, as in ds4-server")
	think := fs.Bool("think", false, "with --chat: thinking enabled")
	nothink := fs.Bool("nothink", false, "with --chat: thinking disabled (the default)")
	special := fs.Bool("special", false, "without --chat: turn special-token text into special tokens")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *think && *nothink {
		return cli.Usage(fmt.Errorf("--think and --nothink exclude each other"))
	}
	text, err := readInput(fs, *file, stdin)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	var ids []int
	if *chat {
		mode := prompt.ThinkOff
		if *think {
			mode = prompt.ThinkHigh
		}
		rendered, err := prompt.RenderSpans([]prompt.Message{{Role: prompt.RoleUser, Content: text}}, prompt.Options{Think: mode})
		if err != nil {
			return err
		}
		ids = rendered.Tokens(tok)
	} else if *special {
		ids = tok.EncodeSpecial(text)
	} else {
		ids = tok.Encode(text)
	}
	if ids == nil {
		ids = []int{}
	}
	out, _ := json.Marshal(ids)
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

func runDetokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("detokenize", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.StringP("file", "f", "", "read the JSON array of ids from FILE")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	text, err := readInput(fs, *file, stdin)
	if err != nil {
		return err
	}
	var ids []int
	if err := json.Unmarshal([]byte(text), &ids); err != nil {
		return fmt.Errorf("want a JSON array of token ids: %w", err)
	}
	tok, err := tokenizer.Default()
	if err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || id >= tok.VocabSize() {
			return fmt.Errorf("id %d at index %d is outside the vocabulary (%d)", id, i, tok.VocabSize())
		}
	}
	_, err = stdout.Write(tok.Decode(ids))
	return err
}
