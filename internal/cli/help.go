package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Command is a ds4 binary or one of its subcommands, as Main runs it and
// its help describes it.
//
// Every command follows one convention: --help or -h prints the help to
// stdout and exits 0; a usage error (a bad flag or value, a missing
// argument, an unknown subcommand) prints the error and the usage line to
// stderr and exits 2; any other error is printed and exits 1.
type Command struct {
	// Name is the command as typed: "ds4-bench" or "ds4-bench roofline".
	Name string
	// Synopsis holds the usage lines, each the part after Name:
	// "[flags] CASE_DIR...". The first one is repeated after a usage
	// error.
	Synopsis []string
	// Summary is one line for the parent's list of commands.
	Summary string
	// Doc says what the command does, in paragraphs; it may be empty.
	Doc string
	// Run runs the command with its arguments (those after Name). It
	// parses its flags with Parse and returns what Parse returns on a
	// help request or a bad flag. Nil for a command that only holds
	// subcommands.
	Run func(args []string) error
	// Commands are the subcommands, chosen by the first argument.
	Commands []Command
}

// Main runs cmd with args and returns the exit status, printing help to
// stdout and errors to stderr as Command describes.
func Main(cmd Command, args []string, stdout, stderr io.Writer) int {
	c, args, err := cmd.find(args)
	if err == nil {
		err = c.Run(args)
	}
	return Exit(c, err, stdout, stderr)
}

// find returns the command that args name and the arguments left for it,
// or a usage error, or a help request for a command without Run.
func (c Command) find(args []string) (Command, []string, error) {
	if len(args) > 0 {
		for _, sub := range c.Commands {
			if args[0] == sub.word() {
				return sub.find(args[1:])
			}
		}
	}
	if c.Run != nil {
		return c, args, nil
	}
	switch {
	case len(args) == 0:
		return c, nil, Usage(errors.New("no command given"))
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		return c, nil, &helpRequest{}
	}
	return c, nil, Usage(fmt.Errorf("unknown command %q", args[0]))
}

// word is the last word of c's name, the one that selects it.
func (c Command) word() string {
	return c.Name[strings.LastIndexByte(c.Name, ' ')+1:]
}

// Exit reports err, the outcome of cmd, and returns the exit status: 0
// for nil or a help request (whose help it prints to stdout), 2 for a
// usage error, 1 otherwise; errors other than ErrReported are printed to
// stderr prefixed with the command's name (a subcommand's word already at
// the start of the message is not repeated).
func Exit(cmd Command, err error, stdout, stderr io.Writer) int {
	var help *helpRequest
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		cmd.WriteHelp(stdout, help.flags)
		return 0
	case errors.Is(err, pflag.ErrHelp):
		cmd.WriteHelp(stdout, nil)
		return 0
	case errors.Is(err, ErrReported):
		return 1
	}
	msg := err.Error()
	if w := cmd.word(); w != cmd.Name {
		msg = strings.TrimPrefix(msg, w+": ")
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.Name, msg)
	var ue *UsageError
	if !errors.As(err, &ue) {
		return 1
	}
	if len(cmd.Synopsis) > 0 {
		fmt.Fprintf(stderr, "Usage: %s %s\n", cmd.Name, cmd.Synopsis[0])
	}
	fmt.Fprintf(stderr, "Run '%s --help' for more.\n", cmd.Name)
	return 2
}

// WriteHelp writes cmd's help, listing the flags of fs (none when fs is
// nil): the usage lines, the description, the subcommands and the flags.
func (cmd Command) WriteHelp(w io.Writer, fs *pflag.FlagSet) {
	syn := cmd.Synopsis
	if len(syn) == 0 {
		syn = []string{"[flags]"}
	}
	for i, s := range syn {
		lead := "Usage:"
		if i > 0 {
			lead = "      "
		}
		fmt.Fprintf(w, "%s %s %s\n", lead, cmd.Name, s)
	}
	if doc := strings.TrimSpace(cmd.Doc); doc != "" {
		fmt.Fprintf(w, "\n%s\n", doc)
	}
	if len(cmd.Commands) > 0 {
		fmt.Fprint(w, "\nCommands:\n")
		width := 0
		for _, sub := range cmd.Commands {
			width = max(width, len(sub.word()))
		}
		for _, sub := range cmd.Commands {
			fmt.Fprintf(w, "  %-*s  %s\n", width, sub.word(), sub.Summary)
		}
		fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags.\n", cmd.Name)
	}
	if fs != nil && fs.HasAvailableFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	}
}

// UsageError is a mistake in the command line: Exit prints it with the
// usage line and returns status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error; a help request and nil pass unchanged.
func Usage(err error) error {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return err
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	return &UsageError{Err: err}
}

// ErrReported is the error of a command that has already printed what
// went wrong (failed cases in a table): Exit returns 1 without a message.
var ErrReported = errors.New("failed (reported above)")

// helpRequest is the error of --help or -h: it carries the flag set whose
// flags the help lists.
type helpRequest struct{ flags *pflag.FlagSet }

func (h *helpRequest) Error() string { return pflag.ErrHelp.Error() }

func (h *helpRequest) Is(target error) bool { return target == pflag.ErrHelp }

// HelpFlags returns the flag set whose flags the help request err lists,
// or nil when err is not a help request from Parse.
func HelpFlags(err error) *pflag.FlagSet {
	var help *helpRequest
	if errors.As(err, &help) {
		return help.flags
	}
	return nil
}
