// Package clitest checks that a ds4 binary follows the command-line
// convention of package cli, for the tests of every command.
package clitest

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/harness"
	"github.com/ds4-go/ds4/internal/cli"
)

// Main is a binary's testable entry point: it runs the command line args
// and returns the exit status.
type Main func(args []string, stdout, stderr io.Writer) int

// Check runs main for the binary that tree describes and for each of its
// subcommands with --help, -h and a bad flag (and, for a command that only
// holds subcommands, with none and with an unknown one), and checks the
// exit status and where the help and the errors go: help on stdout with
// status 0, listing every visible flag the command registers and every
// subcommand; a usage error on stderr with the usage line and status 2.
func Check(t *testing.T, tree func(stdout, stderr io.Writer) cli.Command, main Main) {
	t.Helper()
	walk(tree(io.Discard, io.Discard), nil, func(path []string, c cli.Command) {
		t.Run(strings.Join(append([]string{c.Name}, "help"), " "), func(t *testing.T) {
			checkHelp(t, tree, main, path, c)
		})
		t.Run(c.Name+" bad", func(t *testing.T) {
			checkBad(t, main, path, c)
		})
	})
}

// walk calls f for c, reached by the arguments path, and its subcommands.
func walk(c cli.Command, path []string, f func([]string, cli.Command)) {
	f(path, c)
	for _, sub := range c.Commands {
		walk(sub, append(slices.Clone(path), word(sub.Name)), f)
	}
}

// word is the last word of a command's name.
func word(name string) string { return name[strings.LastIndexByte(name, ' ')+1:] }

// exec runs main with args and returns the status and what it printed.
func exec(main Main, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := main(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// flagsOf returns the flag set c's Run parses, from its help request.
func flagsOf(t *testing.T, tree func(stdout, stderr io.Writer) cli.Command, path []string) *pflag.FlagSet {
	c := tree(io.Discard, io.Discard)
	for _, w := range path {
		i := slices.IndexFunc(c.Commands, func(s cli.Command) bool { return word(s.Name) == w })
		c = c.Commands[i]
	}
	fs := cli.HelpFlags(c.Run([]string{"--help"}))
	if fs == nil {
		t.Fatalf("%s --help: Run does not return the help request of cli.Parse", c.Name)
	}
	return fs
}

func checkHelp(t *testing.T, tree func(stdout, stderr io.Writer) cli.Command, main Main, path []string, c cli.Command) {
	code, out, errOut := exec(main, append(slices.Clone(path), "--help")...)
	if code != 0 || errOut != "" {
		t.Fatalf("%s --help: exit %d, stderr %q; want 0 and nothing", c.Name, code, errOut)
	}
	if !strings.HasPrefix(out, "Usage: "+c.Name+" ") {
		t.Errorf("%s --help starts %q; want \"Usage: %s ...\"", c.Name, firstLine(out), c.Name)
	}
	for _, sub := range c.Commands {
		if !strings.Contains(out, "\n  "+word(sub.Name)+" ") {
			t.Errorf("%s --help does not list the command %s:\n%s", c.Name, word(sub.Name), out)
		}
	}
	if c.Run != nil {
		checkDefaults(t, c.Name, flagsOf(t, tree, path))
		flagsOf(t, tree, path).VisitAll(func(f *pflag.Flag) {
			want := "--" + f.Name
			if f.Shorthand != "" {
				want = "-" + f.Shorthand + ", --" + f.Name
			}
			if !f.Hidden && !listed(out, want) {
				t.Errorf("%s --help does not list %s:\n%s", c.Name, want, out)
			}
		})
	}
	code, short, errOut := exec(main, append(slices.Clone(path), "-h")...)
	if code != 0 || errOut != "" || short != out {
		t.Errorf("%s -h: exit %d, stderr %q, same help %v; want 0, nothing, the --help text", c.Name, code, errOut, short == out)
	}
}

func checkBad(t *testing.T, main Main, path []string, c cli.Command) {
	type bad struct {
		args []string
		want string
	}
	cases := []bad{{append(slices.Clone(path), "--no-such-flag"), "unknown flag: --no-such-flag"}}
	if c.Run == nil {
		cases = []bad{
			{append(slices.Clone(path), "no-such-command"), `unknown command "no-such-command"`},
			{slices.Clone(path), "no command given"},
		}
	}
	for _, b := range cases {
		code, out, errOut := exec(main, b.args...)
		if code != 2 || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing", b.args, code, out)
		}
		if !strings.HasPrefix(errOut, c.Name+": ") || !strings.Contains(errOut, b.want) {
			t.Errorf("%q: stderr %q; want %q: ... %s", b.args, errOut, c.Name, b.want)
		}
		if len(c.Synopsis) > 0 && !strings.Contains(errOut, "\nUsage: "+c.Name+" "+c.Synopsis[0]+"\n") {
			t.Errorf("%q: stderr %q lacks the usage line", b.args, errOut)
		}
	}
}

// checkDefaults checks that the flags every command shares have the one
// default defined for them: --system (and upstream's -sys) and --hash.
func checkDefaults(t *testing.T, name string, fs *pflag.FlagSet) {
	for flag, want := range map[string]string{
		"system": cli.DefaultSystem,
		"sys":    cli.DefaultSystem,
		"hash":   string(harness.DefaultHash),
	} {
		if f := fs.Lookup(flag); f != nil && f.DefValue != want {
			t.Errorf("%s --%s defaults to %q; want %q, the shared default", name, flag, f.DefValue, want)
		}
	}
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// listed reports whether the help out lists the flag spelled flag (a
// boolean's is followed by "[=true|false]", others' by a space).
func listed(out, flag string) bool {
	return strings.Contains(out, "  "+flag+" ") || strings.Contains(out, "  "+flag+"[")
}
