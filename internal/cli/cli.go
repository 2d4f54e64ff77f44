// Package cli holds the command-line conventions every ds4 command shares:
// one help and exit-status convention (Command, Main, Exit), upstream's
// single-dash long flags (-temp, -sys), upstream's flags that this build
// accepts without effect or refuses, messages that name the flag and the
// value at fault, the shared defaults and checks, and the opening of the
// model.
package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/ds4-go/ds4/engine/layout"
)

// Parse parses args with fs after Normalize has rewritten upstream's
// single-dash long flags. It prints nothing: --help or -h gives an error
// that is pflag.ErrHelp and carries fs for the help Exit prints, and a bad
// flag gives a UsageError.
func Parse(fs *pflag.FlagSet, args []string) error {
	fs.Usage = func() {}
	err := fs.Parse(Normalize(fs, args))
	if errors.Is(err, pflag.ErrHelp) {
		return &helpRequest{flags: fs}
	}
	return Usage(err)
}

// Normalize returns args with each single-dash long flag ("-temp 0",
// "-sys=TEXT") rewritten to its double-dash form when its name, two
// characters or more, is a long flag of fs. A registered long name wins
// over a cluster of shorthands ("-temp" is --temp, not -t emp); values of
// flags, and everything after "--", are left alone.
func Normalize(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		switch {
		case a == "--":
			return append(out, args[i+1:]...)
		case len(a) < 2 || a[0] != '-':
			continue // an argument, or "-"
		}
		takesNext := false
		if a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) >= 2 && fs.Lookup(name) != nil {
				a = "-" + a
				out[len(out)-1] = a
			} else {
				takesNext = shortTakesNext(fs, a[1:])
			}
		}
		if strings.HasPrefix(a, "--") {
			name, _, inline := strings.Cut(a[2:], "=")
			f := fs.Lookup(name)
			takesNext = f != nil && !inline && f.NoOptDefVal == ""
		}
		if takesNext && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// shortTakesNext reports whether the shorthand cluster s (without its
// dash) ends in a flag whose value is the next argument, as pflag reads
// clusters: boolean shorthands chain, and the first shorthand that takes a
// value takes the rest of the cluster, or the next argument when none is
// left.
func shortTakesNext(fs *pflag.FlagSet, s string) bool {
	for i := 0; i < len(s); i++ {
		f := fs.ShorthandLookup(s[i : i+1])
		if f == nil {
			return false
		}
		if f.NoOptDefVal == "" {
			return i == len(s)-1
		}
	}
	return false
}

// FlagError returns an error naming the flag --name of fs and the value it
// holds, followed by the formatted reason: "--ctx 1: must be at least 2".
func FlagError(fs *pflag.FlagSet, name, format string, args ...any) error {
	v := ""
	if f := fs.Lookup(name); f != nil {
		v = f.Value.String()
	}
	return fmt.Errorf("--%s %s: %s", name, quote(v), fmt.Sprintf(format, args...))
}

// MinContext is the smallest context that generates anything: one prompt
// token and one generated token.
const MinContext = 2

// Context checks v, the value of the context-size flag --name of fs: from
// MinContext to the DS4 context length (a model's own, which may be
// smaller, is checked once it is open).
func Context(fs *pflag.FlagSet, name string, v int) error {
	switch max := layout.MaxContextLength(); {
	case v < MinContext:
		return FlagError(fs, name, "must be at least %d (one prompt token and one generated token)", MinContext)
	case v > max:
		return FlagError(fs, name, "must be at most %d, the DS4 context length", max)
	}
	return nil
}

// quote returns v as written on a command line, quoted when it is empty or
// holds spaces.
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"'") {
		return fmt.Sprintf("%q", v)
	}
	return v
}

// InputFile checks, before anything is loaded, that the file named by the
// flag --name exists and is not a directory; path "" passes.
func InputFile(name, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("--%s %s: no such file", name, quote(path))
	case err != nil:
		return fmt.Errorf("--%s %s: %w", name, quote(path), err)
	case st.IsDir():
		return fmt.Errorf("--%s %s: is a directory, not a file", name, quote(path))
	}
	return nil
}

// OutputFile checks, before anything is loaded, that the file named by the
// flag --name can be created: it is not a directory and its directory
// exists; path "" passes.
func OutputFile(name, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--%s %s: is a directory, not a file", name, quote(path))
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("--%s %s: no such directory %s", name, quote(path), dir)
	case err != nil:
		return fmt.Errorf("--%s %s: %w", name, quote(path), err)
	case !st.IsDir():
		return fmt.Errorf("--%s %s: %s is not a directory", name, quote(path), dir)
	}
	return nil
}

// CreatePrivate creates or truncates the file at path for writing,
// readable and writable by its owner only: trace files hold whole prompts.
// An existing regular file is narrowed to mode 0600 as well; devices and
// pipes (such as /dev/stderr) keep their mode.
func CreatePrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Mode().IsRegular() && st.Mode().Perm() != 0o600 {
		err = f.Chmod(0o600)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
