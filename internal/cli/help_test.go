package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// testCommand is a binary "tool" with a flag and a subcommand "sub" whose
// Run fails as its flags ask.
func testCommand() Command {
	sub := func(args []string) error {
		fs := pflag.NewFlagSet("tool sub", pflag.ContinueOnError)
		n := fs.IntP("count", "n", 1, "how many")
		fail := fs.Bool("fail", false, "fail at run time")
		if err := Parse(fs, args); err != nil {
			return err
		}
		switch {
		case *n < 1:
			return Usage(FlagError(fs, "count", "must be at least 1"))
		case *fail:
			return errors.New("sub: it failed")
		case fs.NArg() > 0:
			return ErrReported
		}
		return nil
	}
	return Command{
		Name:     "tool",
		Synopsis: []string{"COMMAND [flags]"},
		Doc:      "Does things.",
		Commands: []Command{{Name: "tool sub", Synopsis: []string{"[flags] [ARG]"}, Summary: "the one command", Doc: "Does one thing.", Run: sub}},
	}
}

// TestMainConvention runs a command tree through Main: help to stdout with
// status 0, usage errors to stderr with the usage line and status 2, other
// errors with status 1.
func TestMainConvention(t *testing.T) {
	const subUsage = "Run 'tool sub --help' for more.\n"
	for _, c := range []struct {
		args   []string
		code   int
		stdout []string // substrings, in order
		stderr string   // exact
	}{
		{[]string{"--help"}, 0, []string{"Usage: tool COMMAND [flags]\n\nDoes things.\n\nCommands:\n  sub  the one command\n"}, ""},
		{[]string{"-h"}, 0, []string{"Usage: tool COMMAND [flags]\n"}, ""},
		{[]string{"help"}, 0, []string{"Usage: tool COMMAND [flags]\n"}, ""},
		{[]string{"sub", "--help"}, 0, []string{"Usage: tool sub [flags] [ARG]\n\nDoes one thing.\n\nFlags:\n", "-n, --count int", "--fail[=true|false]"}, ""},
		{[]string{"sub", "-h"}, 0, []string{"Usage: tool sub [flags] [ARG]\n"}, ""},
		{nil, 2, nil, "tool: no command given\nUsage: tool COMMAND [flags]\nRun 'tool --help' for more.\n"},
		{[]string{"nope"}, 2, nil, "tool: unknown command \"nope\"\nUsage: tool COMMAND [flags]\nRun 'tool --help' for more.\n"},
		{[]string{"sub", "--nope"}, 2, nil, "tool sub: unknown flag: --nope\nUsage: tool sub [flags] [ARG]\n" + subUsage},
		{[]string{"sub", "-n", "x"}, 2, nil, "tool sub: invalid argument \"x\" for \"-n, --count\" flag: must be an integer\nUsage: tool sub [flags] [ARG]\n" + subUsage},
		{[]string{"sub", "-n", "0"}, 2, nil, "tool sub: --count 0: must be at least 1\nUsage: tool sub [flags] [ARG]\n" + subUsage},
		{[]string{"sub", "-count", "0"}, 2, nil, "tool sub: --count 0: must be at least 1\nUsage: tool sub [flags] [ARG]\n" + subUsage},
		{[]string{"sub", "--fail"}, 1, nil, "tool sub: it failed\n"},
		{[]string{"sub", "x"}, 1, nil, ""},
		{[]string{"sub"}, 0, nil, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(testCommand(), c.args, &stdout, &stderr)
		if code != c.code || stderr.String() != c.stderr {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", c.args, code, stderr.String(), c.code, c.stderr)
		}
		rest := stdout.String()
		for _, want := range c.stdout {
			i := strings.Index(rest, want)
			if i < 0 {
				t.Errorf("%q: stdout %q lacks %q", c.args, stdout.String(), want)
				break
			}
			rest = rest[i+len(want):]
		}
		if c.stdout == nil && stdout.Len() > 0 {
			t.Errorf("%q: stdout %q; want nothing", c.args, stdout.String())
		}
	}
}

// TestUsage checks that Usage marks errors once and leaves help requests
// and nil alone.
func TestUsage(t *testing.T) {
	base := errors.New("bad")
	ue := Usage(base)
	var got *UsageError
	if !errors.As(ue, &got) || !errors.Is(ue, base) {
		t.Fatalf("Usage(%v) = %#v: not a UsageError wrapping it", base, ue)
	}
	if Usage(fmt.Errorf("ctx: %w", ue)) == nil || Usage(nil) != nil {
		t.Errorf("Usage rewraps or turns nil into an error")
	}
	help := Parse(pflag.NewFlagSet("x", pflag.ContinueOnError), []string{"--help"})
	if !errors.Is(Usage(help), pflag.ErrHelp) || errors.As(Usage(help), &got) || HelpFlags(help) == nil {
		t.Errorf("Usage(help request) = %v: want the help request unchanged", Usage(help))
	}
}
